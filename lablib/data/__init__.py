"""Dataset loaders: Reuters newswire, MoleculeNet molecules, TU datasets, Cora.

Where a loader reads its files from, in order: an explicit ``data_dir`` argument, the
``LABLIB_DATA_DIR`` environment variable, the local cache (``~/.cache/lablib`` or
``LABLIB_CACHE_DIR``), then a download verified by checksum (see
:mod:`lablib.data.sources`).
"""

from lablib._lazy import lazy_exports

_MODULES = {  # submodule: the names it exports
    "reuters": (
        "load_reuters",
        "reuters_word_index",
        "reuters_topic_names",
        "decode_newswire",
        "reuters_dataset",
        "reuters_bucket_lengths",
        "truncate_sequences",
    ),
    "molecules": ("load_molecules", "MoleculeDataset", "smiles_to_graph", "morgan_fingerprints"),
    "graph_dataset": ("GraphDataset",),
    "tu": ("load_tu_dataset",),
    "cora": ("load_cora", "CoraData"),
    "sources": ("DataNotFoundError", "ChecksumError", "fetch_dataset", "dataset_status"),
}

__getattr__, __dir__, __all__ = lazy_exports("lablib.data", _MODULES, globals())
