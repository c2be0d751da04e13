"""Dataset loaders: Reuters newswire, MoleculeNet molecules, TU datasets, Cora.

Where a loader reads its files from, in order: an explicit ``data_dir`` argument, the
``LABLIB_DATA_DIR`` environment variable, the local cache (``~/.cache/lablib`` or
``LABLIB_CACHE_DIR``), then a download verified by checksum (see
:mod:`lablib.data.sources`).
"""

from lablib._lazy import lazy_exports

_EXPORTS = {
    "load_reuters": "reuters",
    "reuters_word_index": "reuters",
    "reuters_topic_names": "reuters",
    "decode_newswire": "reuters",
    "reuters_dataset": "reuters",
    "reuters_bucket_lengths": "reuters",
    "truncate_sequences": "reuters",
    "load_molecules": "molecules",
    "MoleculeDataset": "molecules",
    "smiles_to_graph": "molecules",
    "morgan_fingerprints": "molecules",
    "GraphDataset": "graph_dataset",
    "load_tu_dataset": "tu",
    "load_cora": "cora",
    "CoraData": "cora",
    "DataNotFoundError": "sources",
    "ChecksumError": "sources",
    "fetch_dataset": "sources",
    "dataset_status": "sources",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports('lablib.data', _EXPORTS, globals())
