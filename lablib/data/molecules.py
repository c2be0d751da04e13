"""Molecule datasets (MoleculeNet ESOL, FreeSolv, Lipophilicity) as graphs, with RDKit.

Every SMILES string becomes a graph: one node per heavy atom, two directed edges per
bond (``i -> j`` and ``j -> i``), node and edge features listed in
:data:`ATOM_FEATURE_NAMES` and :data:`BOND_FEATURE_NAMES`. A dataset then gives
random or scaffold splits and ``tf.data`` batches in the two layouts of
:mod:`lablib.graphs` (padded dense, or disjoint).

:class:`~lablib.data.graph_dataset.GraphDataset` (its own module) is the common base,
shared with the TU datasets (:mod:`lablib.data.tu`).

Example::

    from lablib.data import load_molecules
    esol = load_molecules("esol", data_dir="../shared/data")
    len(esol), esol.num_node_features                 # 1128, 37
    train, valid, test = esol.split("scaffold")
    for (x, adjacency, mask), y in train.dense_dataset(batch_size=32).take(1):
        x.shape, adjacency.shape, mask.shape, y.shape  # (32, N, 37) (32, N, N) (32, N) (32,)
"""

from __future__ import annotations

import collections
import csv
import functools
import pathlib
import warnings
from typing import NamedTuple
from collections.abc import Sequence

import numpy as np

from lablib.data import sources
from lablib.data.graph_dataset import GraphDataset

__all__ = [
    "GraphDataset",
    "MoleculeDataset",
    "MoleculeGraph",
    "load_molecules",
    "smiles_to_graph",
    "morgan_fingerprints",
    "ELEMENTS",
    "ATOM_FEATURE_NAMES",
    "BOND_FEATURE_NAMES",
    "MOLECULE_DATASETS",
]

# --------------------------------------------------------------------------- features

#: Elements with their own one-hot column; every other element goes to "other".
ELEMENTS = ("C", "N", "O", "F", "P", "S", "Cl", "Br", "I", "B", "Si", "Se")
_DEGREES = (0, 1, 2, 3, 4, 5)  # 5 means 5 or more
_CHARGES = (-2, -1, 0, 1, 2)  # clipped to this range
_HYDROGENS = (0, 1, 2, 3, 4)  # 4 means 4 or more
_HYBRIDISATIONS = ("SP", "SP2", "SP3", "SP3D", "SP3D2", "other")
_BOND_TYPES = ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC")

ATOM_FEATURE_NAMES = tuple(
    [f"element={e}" for e in ELEMENTS]
    + ["element=other"]
    + [f"degree={d}" for d in _DEGREES[:-1]]
    + [f"degree>={_DEGREES[-1]}"]
    + [f"formal_charge<={_CHARGES[0]}"]
    + [f"formal_charge={c:+d}" if c else "formal_charge=0" for c in _CHARGES[1:-1]]
    + [f"formal_charge>={_CHARGES[-1]:+d}"]
    + [f"total_hydrogens={h}" for h in _HYDROGENS[:-1]]
    + [f"total_hydrogens>={_HYDROGENS[-1]}"]
    + [f"hybridisation={h}" for h in _HYBRIDISATIONS]
    + ["aromatic", "in_ring"]
)
BOND_FEATURE_NAMES = tuple([f"bond={b.lower()}" for b in _BOND_TYPES] + ["conjugated", "in_ring"])

_ELEMENT_COLUMN = {e: i for i, e in enumerate(ELEMENTS)}
_OFFSETS = np.cumsum(
    [0, len(ELEMENTS) + 1, len(_DEGREES), len(_CHARGES), len(_HYDROGENS), len(_HYBRIDISATIONS)]
)
_HYBRID_COLUMN = {h: i for i, h in enumerate(_HYBRIDISATIONS)}
_BOND_COLUMN = {b: i for i, b in enumerate(_BOND_TYPES)}


class MoleculeGraph(NamedTuple):
    """One featurised molecule (unpacks as ``x, edge_index, edge_attr``).

    Attributes:
        x: float32 ``[num_atoms, len(ATOM_FEATURE_NAMES)]`` node features.
        edge_index: int64 ``[2, 2 * num_bonds]``, row 0 source, row 1 target; bond
            ``k`` gives edges ``2k`` (begin -> end) and ``2k + 1`` (end -> begin).
        edge_attr: float32 ``[2 * num_bonds, len(BOND_FEATURE_NAMES)]``.
    """

    x: np.ndarray
    edge_index: np.ndarray
    edge_attr: np.ndarray


def _rdkit():
    try:
        from rdkit import Chem, rdBase
    except ImportError as error:  # pragma: no cover - rdkit is a dev dependency
        raise ImportError(
            "lablib's molecule datasets need RDKit: pip install 'rdkit>=2024.3' "
            "(or pip install 'lablib[molecules]')."
        ) from error
    return Chem, rdBase


def _parse(smiles: str):
    """An RDKit molecule, or None; RDKit's own error printing is silenced."""
    Chem, rdBase = _rdkit()
    if not isinstance(smiles, str) or not smiles.strip():
        return None
    blocker = rdBase.BlockLogs()
    try:
        molecule = Chem.MolFromSmiles(smiles)
    finally:
        del blocker
    if molecule is None or molecule.GetNumAtoms() == 0:
        return None
    return molecule


@functools.lru_cache(maxsize=1)
def _enum_columns():
    """RDKit enum value -> column, for hybridisation and bond type (dict lookups are fast)."""
    Chem, _ = _rdkit()
    hybrid = {getattr(Chem.HybridizationType, h): i for i, h in enumerate(_HYBRIDISATIONS[:-1])}
    bond = {getattr(Chem.BondType, b): i for i, b in enumerate(_BOND_TYPES)}
    return hybrid, bond


def _featurise(molecule) -> MoleculeGraph:
    hybrid_column, bond_column = _enum_columns()
    # Index access is faster than iterating RDKit's Python sequence wrappers.
    atoms = [molecule.GetAtomWithIdx(i) for i in range(molecule.GetNumAtoms())]
    num_atoms = len(atoms)
    other_element, other_hybrid = len(ELEMENTS), len(_HYBRIDISATIONS) - 1
    low, high = _CHARGES[0], _CHARGES[-1]
    columns = np.array(
        [
            (
                _ELEMENT_COLUMN.get(atom.GetSymbol(), other_element),
                min(atom.GetDegree(), _DEGREES[-1]),
                min(max(atom.GetFormalCharge(), low), high) - low,
                min(atom.GetTotalNumHs(), _HYDROGENS[-1]),
                hybrid_column.get(atom.GetHybridization(), other_hybrid),
                atom.GetIsAromatic(),
                atom.IsInRing(),
            )
            for atom in atoms
        ],
        dtype=np.int64,
    ).reshape(num_atoms, 7)
    x = np.zeros((num_atoms, len(ATOM_FEATURE_NAMES)), dtype=np.float32)
    rows = np.arange(num_atoms)
    for group in range(5):
        x[rows, _OFFSETS[group] + columns[:, group]] = 1.0
    x[:, _OFFSETS[5] :] = columns[:, 5:]

    bonds = np.array(
        [
            (
                bond.GetBeginAtomIdx(),
                bond.GetEndAtomIdx(),
                bond_column.get(bond.GetBondType(), -1),  # -1: dative or exotic, no column
                bond.GetIsConjugated(),
                bond.IsInRing(),
            )
            for bond in map(molecule.GetBondWithIdx, range(molecule.GetNumBonds()))
        ],
        dtype=np.int64,
    ).reshape(-1, 5)
    num_bonds = len(bonds)
    # bond k gives edge 2k (begin -> end) and edge 2k + 1 (end -> begin)
    edge_index = np.empty((2, 2 * num_bonds), dtype=np.int64)
    edge_index[0, 0::2], edge_index[1, 0::2] = bonds[:, 0], bonds[:, 1]
    edge_index[0, 1::2], edge_index[1, 1::2] = bonds[:, 1], bonds[:, 0]
    bond_features = np.zeros((num_bonds, len(BOND_FEATURE_NAMES)), dtype=np.float32)
    typed = bonds[:, 2] >= 0
    bond_features[np.flatnonzero(typed), bonds[typed, 2]] = 1.0
    bond_features[:, len(_BOND_TYPES) :] = bonds[:, 3:]
    edge_attr = np.repeat(bond_features, 2, axis=0)
    return MoleculeGraph(x, edge_index, edge_attr)


def smiles_to_graph(smiles: str) -> MoleculeGraph:
    """Featurise one molecule given as SMILES (heavy atoms only).

    Node features (:data:`ATOM_FEATURE_NAMES`, 37 columns): one-hot element over
    :data:`ELEMENTS` plus "other", one-hot degree (0..5+), formal charge (-2..+2,
    clipped), total hydrogens (0..4+) and hybridisation (SP, SP2, SP3, SP3D, SP3D2,
    other), then aromatic and in-ring flags. Edge features (:data:`BOND_FEATURE_NAMES`,
    6 columns): one-hot bond type (single, double, triple, aromatic), conjugated,
    in ring. Each bond gives two directed edges with the same features.

    Args:
        smiles: a SMILES string.

    Returns:
        A :class:`MoleculeGraph` ``(x, edge_index, edge_attr)``.

    Raises:
        ValueError: RDKit cannot parse ``smiles`` (or it has no atoms).

    Example::

        x, edge_index, edge_attr = smiles_to_graph("CCO")   # ethanol
        x.shape, edge_index.tolist()   # (3, 37), [[0, 1, 1, 2], [1, 0, 2, 1]]
    """
    molecule = _parse(smiles)
    if molecule is None:
        raise ValueError(
            f"RDKit could not parse the SMILES {smiles!r} (or it has no atoms). Check the "
            f"string, e.g. with rdkit.Chem.MolFromSmiles, which prints the reason."
        )
    return _featurise(molecule)


def morgan_fingerprints(smiles, radius: int = 2, n_bits: int = 2048, dtype="float32") -> np.ndarray:
    """Morgan (ECFP-like) bit fingerprints, one row per molecule.

    Args:
        smiles: a SMILES string, a list of them, or a :class:`MoleculeDataset`.
        radius: Morgan radius (2 gives ECFP4-like bits).
        n_bits: fingerprint length.
        dtype: NumPy dtype of the result (``float32`` feeds a Keras MLP directly).

    Returns:
        Array ``[num_molecules, n_bits]`` of 0/1.

    Raises:
        ValueError: a SMILES cannot be parsed (the message lists which), or bad sizes.

    Example::

        fingerprints = morgan_fingerprints(esol.smiles)      # [1128, 2048]
    """
    from rdkit.Chem import rdFingerprintGenerator

    if isinstance(smiles, GraphDataset):
        smiles = smiles.smiles
    if isinstance(smiles, str):
        smiles = [smiles]
    smiles = list(smiles)
    for value, what in ((radius, "radius"), (n_bits, "n_bits")):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, np.integer))
            or value < (0 if what == "radius" else 1)
        ):
            raise ValueError(
                f"{what} must be a {'non-negative' if what == 'radius' else 'positive'} int, got {value!r}."
            )
    molecules = [_parse(s) for s in smiles]
    bad = [(i, s) for i, (s, m) in enumerate(zip(smiles, molecules)) if m is None]
    if bad:
        raise ValueError(
            f"morgan_fingerprints: {len(bad)} SMILES could not be parsed, e.g. "
            f"{bad[:3]} (index, SMILES). Remove them first."
        )
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    out = np.zeros((len(molecules), n_bits), dtype=dtype)
    for i, molecule in enumerate(molecules):
        out[i] = generator.GetFingerprintAsNumPy(molecule)
    return out


# --------------------------------------------------------------------------- datasets


class MoleculeDataset(GraphDataset):
    """Molecules featurised by :func:`smiles_to_graph`, with one float32 target each.

    Attributes (besides those of :class:`GraphDataset`):
        smiles: list of the SMILES strings kept, in dataset order.
        skipped: list of ``(row, smiles)`` that RDKit could not parse (``row`` is the
            1-based data row of the CSV file); they are not in the dataset.
        target_name: the CSV column of the target.

    Example::

        dataset = MoleculeDataset.from_smiles(["CCO", "c1ccccc1"], [-0.77, -1.64])
        dataset.x[0].shape, dataset.edge_attr[1].shape    # (3, 37), (12, 6)
    """

    _target_dtype = np.float32

    def __init__(
        self, x, edge_index, edge_attr, y, smiles, skipped=(), target_name=None, name=None
    ):
        super().__init__(
            x,
            edge_index,
            y,
            edge_attr=edge_attr,
            feature_names=ATOM_FEATURE_NAMES,
            edge_feature_names=BOND_FEATURE_NAMES,
            name=name,
        )
        self.smiles = list(smiles)
        self.skipped = list(skipped)
        self.target_name = target_name
        if len(self.smiles) != len(self):
            raise ValueError(f"{self.name}: {len(self.smiles)} SMILES for {len(self)} graphs.")

    def _extra(self, indices) -> dict:
        return {"smiles": [self.smiles[i] for i in indices], "skipped": []}

    @classmethod
    def from_smiles(cls, smiles: Sequence[str], y, name=None, target_name=None, rows=None):
        """Featurise a list of SMILES; unparseable ones are skipped with a warning.

        Args:
            smiles: SMILES strings.
            y: one target per SMILES.
            name: dataset name.
            target_name: what ``y`` measures.
            rows: labels of the entries for the skip report (default: 0-based positions).

        Returns:
            A :class:`MoleculeDataset` of the parseable molecules; ``.skipped`` lists the
            others as ``(row, smiles)``.
        """
        smiles = list(smiles)
        targets = np.asarray(y, dtype=np.float32).reshape(len(smiles), -1)
        targets = targets[:, 0] if targets.shape[1] == 1 else targets
        rows = list(range(len(smiles))) if rows is None else list(rows)
        graphs_, kept, kept_y, skipped = [], [], [], []
        for row, text, target in zip(rows, smiles, targets):
            molecule = _parse(text)
            if molecule is None:
                skipped.append((row, text))
                continue
            graphs_.append(_featurise(molecule))
            kept.append(text)
            kept_y.append(target)
        name = name or "molecules"
        if skipped:
            examples = ", ".join(f"row {r}: {s!r}" for r, s in skipped[:5])
            warnings.warn(
                f"{name}: {len(skipped)} of {len(smiles)} SMILES could not be parsed by "
                f"RDKit and were skipped ({examples}{', ...' if len(skipped) > 5 else ''}). "
                f"They are listed in the dataset's .skipped attribute.",
                stacklevel=3,
            )
        return cls(
            [g.x for g in graphs_],
            [g.edge_index for g in graphs_],
            [g.edge_attr for g in graphs_],
            np.array(kept_y, dtype=np.float32).reshape((len(kept_y),) + targets.shape[1:]),
            kept,
            skipped=skipped,
            target_name=target_name,
            name=name,
        )

    @classmethod
    def from_csv(cls, path, target_column: str, smiles_column: str = "smiles", name=None):
        """Read a CSV file of SMILES and targets (any line endings) and featurise it.

        Args:
            path: the CSV file.
            target_column: the column holding the target value.
            smiles_column: the column holding the SMILES.
            name: dataset name (default: the file name).

        Returns:
            A :class:`MoleculeDataset`; rows whose SMILES RDKit cannot parse are skipped
            with a warning (see ``.skipped``; rows are numbered from 1 after the header).

        Raises:
            ValueError: a column is missing or a target is not a number.

        Example::

            dataset = MoleculeDataset.from_csv("my.csv", target_column="logS")
        """
        path = pathlib.Path(path)
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            columns = reader.fieldnames or []
            for column in (smiles_column, target_column):
                if column not in columns:
                    raise ValueError(
                        f"{path} has no column {column!r}; its columns are {columns}. Pass "
                        f"smiles_column=/target_column= with the right names."
                    )
            smiles, targets, rows = [], [], []
            for row_number, row in enumerate(reader, start=1):
                try:
                    targets.append(float(row[target_column]))
                except (TypeError, ValueError):
                    raise ValueError(
                        f"{path}, data row {row_number}: target {target_column!r} is "
                        f"{row[target_column]!r}, not a number."
                    ) from None
                smiles.append(row[smiles_column].strip())
                rows.append(row_number)
        return cls.from_smiles(
            smiles, targets, name=name or path.name, target_name=target_column, rows=rows
        )

    def _scaffold_parts(self, train_size, valid_size):
        groups = collections.defaultdict(list)
        for i, text in enumerate(self.smiles):
            groups[murcko_scaffold(text)].append(i)
        # Largest scaffold groups first; ties by first appearance: deterministic.
        ordered = sorted(groups.values(), key=lambda members: (-len(members), members[0]))
        train, valid, test = [], [], []
        for members in ordered:
            if len(train) + len(members) <= train_size:
                train.extend(members)
            elif len(valid) + len(members) <= valid_size:
                valid.extend(members)
            else:
                test.extend(members)
        return (
            np.array(train, dtype=np.int64),
            np.array(valid, dtype=np.int64),
            np.array(test, dtype=np.int64),
        )


def murcko_scaffold(smiles: str) -> str:
    """The Bemis-Murcko scaffold of a molecule as canonical SMILES ('' if acyclic).

    Example::

        murcko_scaffold("CCc1ccccc1")     # 'c1ccccc1'
    """
    from rdkit.Chem.Scaffolds import MurckoScaffold

    molecule = _parse(smiles)
    if molecule is None:
        raise ValueError(f"RDKit could not parse the SMILES {smiles!r}.")
    return MurckoScaffold.MurckoScaffoldSmiles(mol=molecule, includeChirality=False)


# --------------------------------------------------------------------------- loaders

#: name -> (registry entry, CSV file, target column, description)
MOLECULE_DATASETS = {
    "esol": (
        "esol",
        "delaney-processed.csv",
        "measured log solubility in mols per litre",
        "aqueous solubility, log(mol/L)",
    ),
    "freesolv": ("freesolv", "SAMPL.csv", "expt", "hydration free energy, kcal/mol"),
    "lipophilicity": ("lipophilicity", "Lipophilicity.csv", "exp", "octanol/water logD at pH 7.4"),
}


def load_molecules(name: str, data_dir=None) -> MoleculeDataset:
    """Load a MoleculeNet regression dataset as featurised molecule graphs.

    ========================  ===================================  ==========  =========
    name                      target                               molecules   file
    ========================  ===================================  ==========  =========
    ``"esol"``                log solubility in mol/L (Delaney)    1,128       delaney-processed.csv
    ``"freesolv"``            hydration free energy, kcal/mol      642         SAMPL.csv
    ``"lipophilicity"``       logD at pH 7.4 (ChEMBL)              4,200       Lipophilicity.csv
    ========================  ===================================  ==========  =========

    Args:
        name: one of the names above (case-insensitive).
        data_dir: a folder holding ``molecules/`` (see :mod:`lablib.data.sources` for
            the search order: ``LABLIB_DATA_DIR``, the cache, a verified download).

    Returns:
        A :class:`MoleculeDataset` with float32 targets ``y``.

    Raises:
        ValueError: unknown name.
        DataNotFoundError: the file is nowhere and cannot be downloaded.

    Example::

        esol = load_molecules("esol", data_dir="../shared/data")
        train, valid, test = esol.split("scaffold")
    """
    key = str(name).strip().lower()
    if key not in MOLECULE_DATASETS:
        raise ValueError(
            f"Unknown molecule dataset {name!r}; choose one of {', '.join(MOLECULE_DATASETS)} "
            f"(for MUTAG use lablib.data.load_tu_dataset)."
        )
    entry, file_name, column, _ = MOLECULE_DATASETS[key]
    folder = sources.dataset_path(entry, data_dir)
    return MoleculeDataset.from_csv(folder / file_name, target_column=column, name=key)
