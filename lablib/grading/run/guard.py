"""Cribs: a graded piece the lab asks students to write by hand must not be passed by
calling lablib's own implementation of it, a judge's reference, or a ready-made layer
that does the piece's work (``keras.layers.MultiHeadAttention`` for the multi-head
attention piece).

Students install lablib, so ``lablib.layers.scaled_dot_product_attention`` or
``lablib.grading.specs.lab3_gcn_molecules.reference_gcn`` are importable from their
cells. While a probe of a by-hand piece (:attr:`lablib.grading.spec.Piece.by_hand`) runs,
a :class:`Window` makes them unreachable instead of watching for calls (a tracer can be
switched off, dodged from a thread or fooled by a file name):

* **Disarmed in place.** Every function of lablib's guarded modules (its layers, the
  specs' references and judges: :data:`BY_HAND`), including copies loaded again from
  their files under another name or path, and every method of the ready-made classes and
  functions in :data:`READY_MADE`, has its ``__code__`` swapped for one that raises
  :class:`CribCall`. Every reference to such a function (a ``functools.partial``, a
  dict entry, a bound method, a thread's target) reaches the raiser; the crib is noted
  when it is raised, so an ``except BaseException`` that swallows it gains nothing. The
  original code objects are put back when the probe ends (in ``lablib.check``; in the
  grader's child nothing is put back once :func:`seal` ran, but the probe's own functions,
  for that probe). lablib's guarded modules not
  imported yet are imported first (its layers once TensorFlow is); a guarded or
  ready-made module imported while the probe runs is disarmed as it loads (a finder put
  first in ``sys.meta_path``).
* **An audit hook** (PEP 578; it cannot be removed) refuses, while the window is open,
  what would fetch those implementations again: opening a guarded file (resolved paths:
  ``/./`` and links do not help; lablib's lines are dropped from ``linecache`` for the
  window, so ``inspect.getsource`` has nothing to read), compiling code under a guarded
  file's name, running or building a function from lablib's own code (``exec``,
  ``types.FunctionType``) or a code object built from its bytecode, giving a disarmed
  function its code back, removing the finder, searching the interpreter's objects
  (``gc``) and new processes.
* **Copies by value** are compared: before the probe runs, the objects the graded names
  reach (functions, closures, defaults, the globals their code reads, class members,
  containers) are searched for lablib's guarded code or a ready-made class (bound to a
  name, kept in a dict, a base class) and for code copied from lablib's files (the same
  bytecode, names and constants, comments, docstring and local names aside: what
  ``inspect.getsource`` + ``exec`` or ``types.FunctionType(f.__code__, ...)`` give), as a
  copied classmate's code would be found.
* **TensorFlow graphs**: running a graph runs no Python, so lablib's function traced into
  one in a cell (``tf.function(f).get_concrete_function(...)`` kept without ``f``, a Keras
  model's ``predict``) escapes the raisers. TensorFlow records, for each operation, the
  Python stack that made it; the search also looks into the TensorFlow objects the graded
  names reach (a ``tf.function`` and its traces, concrete functions, ``tf.Module``, Keras
  layers and models, each graph's nested functions), and a graph with an operation made
  while lablib's guarded code or a ready-made class ran is a crib, named by the outermost
  such function. Only the frames from where the trace began count (not a probe that
  called a traced function), and not the probe's own functions. Renaming name scopes or
  the student's objects changes none of it. A graph rebuilt from a definition (a saved
  model loaded, ``import_graph_def``, a ``FunctionDef`` kept) records no code: it is a
  crib too (:data:`UNTRACED`).
* **Threads** the student's code started still meet the raisers; the window waits for
  them briefly, and one still running when the probe ends fails the probe (what it
  computes afterwards could not be judged), as does every later by-hand probe while it runs.

What the probe itself needs stays callable: the functions its own code reaches (its
helpers, the ``handed_*`` functions it gives the student's code as inputs) are found from
the probe's code before the window opens, and stay callable during that probe only. Judges
run outside the window (in the grader, or after it in ``lablib.check``), so a judge may
call any reference. Pieces that build models with lablib's layers (the labs' ``build_*``
pieces) are not guarded.

In the grader's child the window is not the only time the probe's inputs and reply are
reachable: before the first by-hand probe the child seals (:func:`seal`), and lablib's
code stays disarmed until the process ends; each window then opens over the seal.

What it does not cover: the student's graded cells run before the probes, outside any
window, so values computed with lablib there (a table of answers for the public tests'
inputs) are not lablib's code when the probe runs; a copy of lablib's function hidden
where only a dynamic lookup finds it (an attribute of another library's object, a
TensorFlow function registered with its runtime and called by its name); code that
writes the interpreter's memory (``ctypes``) or rebuilds lablib's functions from this
module's own state in edited form. Code in the student's process can always reach into
that process: the guard makes the obvious and the known routes fail and name themselves,
it is not a sandbox. The judges' hidden tests, whose inputs are not published, are the
answer to the first; :func:`message` names what was found.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import linecache
import os
import sys
import threading
import time
import types
import weakref

__all__ = [
    "BY_HAND",
    "HANDED_PREFIX",
    "READY_MADE",
    "UNTRACED",
    "Crib",
    "CribCall",
    "Window",
    "message",
    "protect",
    "read_command",
    "seal",
    "verify",
]

#: What a by-hand piece's code may not reach, relative to lablib's package folder: its
#: layers and the labs' specs (the judges' references). lablib's graph utilities
#: (``lablib.graphs``) and the grading machinery stay allowed, but for the three graph
#: helpers that compute what Lab 3's and Lab 4's pieces ask (``gcn_norm``,
#: ``gcn_norm_dense``, ``segment_softmax``: rows of :data:`READY_MADE`).
BY_HAND = ("layers" + os.sep, os.path.join("grading", "specs") + os.sep)

#: The name that marks a spec's function the probes hand to the student's code as an
#: input (Lab 1's ``equivariance_gap(attention_fn, ...)``). A probe's own functions are
#: found from its code, so the prefix is a naming convention, not a permission: a
#: ``handed_*`` function the probe does not use is disarmed like the rest.
HANDED_PREFIX = "handed_"

#: Ready-made implementations of what the by-hand pieces ask for, a line each: the name
#: students know, then where it is defined (``module:attribute``). The order matters: the
#: first row that holds an object names it.
_READY_MADE_ROWS = """
keras.layers.MultiHeadAttention                  keras.src.layers.attention.multi_head_attention:MultiHeadAttention
keras.layers.GroupQueryAttention                 keras.src.layers.attention.grouped_query_attention:GroupedQueryAttention
keras.layers.Attention                           keras.src.layers.attention.attention:Attention
keras.layers.AdditiveAttention                   keras.src.layers.attention.additive_attention:AdditiveAttention
keras.ops.dot_product_attention                  keras.src.ops.nn:dot_product_attention
keras.ops.dot_product_attention                  keras.src.ops.nn:DotProductAttention
keras.ops.dot_product_attention                  keras.src.backend.tensorflow.nn:dot_product_attention
keras.ops.dot_product_attention                  keras.src.backend.tensorflow.nn:_dot_product_attention_xla
keras.ops.dot_product_attention                  keras.src.backend.tensorflow.nn:_apply_masks
keras.ops.dot_product_attention                  keras.src.backend.numpy.nn:dot_product_attention
keras.ops.dot_product_attention                  keras.src.backend.numpy.nn:_dot_product_attention_xla
keras.ops.dot_product_attention                  keras.src.backend.numpy.nn:_apply_masks
keras.ops.dot_product_attention                  keras.src.backend.jax.nn:dot_product_attention
keras.ops.dot_product_attention                  keras.src.backend.jax.nn:_dot_product_attention_core
keras.ops.dot_product_attention                  keras.src.backend.jax.nn:_apply_masks
keras.ops.dot_product_attention                  keras.src.backend.torch.nn:dot_product_attention
keras.metrics.F1Score                            keras.src.metrics.f_score_metrics:FBetaScore
keras.metrics.F1Score                            keras.src.metrics.f_score_metrics:F1Score
tf_keras.layers.MultiHeadAttention               tf_keras.src.layers.attention.multi_head_attention:MultiHeadAttention
tf_keras.layers.Attention                        tf_keras.src.layers.attention.attention:Attention
tf_keras.layers.Attention                        tf_keras.src.layers.attention.base_dense_attention:BaseDenseAttention
tf_keras.layers.AdditiveAttention                tf_keras.src.layers.attention.additive_attention:AdditiveAttention
tf_keras.metrics.F1Score                         tf_keras.src.metrics.f_score_metrics:FBetaScore
tf_keras.metrics.F1Score                         tf_keras.src.metrics.f_score_metrics:F1Score
tfm.nlp.layers.TransformerEncoderBlock           official.nlp.modeling.layers.transformer_encoder_block:TransformerEncoderBlock
tfm.nlp.layers.Transformer                       official.nlp.modeling.layers.transformer:Transformer
tfm.nlp.layers.TransformerDecoderBlock           official.nlp.modeling.layers.transformer:TransformerDecoderBlock
tfm.nlp.layers.PositionEmbedding                 official.nlp.modeling.layers.position_embedding:PositionEmbedding
tfm.nlp.layers.RelativePositionEmbedding         official.nlp.modeling.layers.position_embedding:RelativePositionEmbedding
keras_hub.layers.SinePositionEncoding            keras_hub.src.layers.modeling.sine_position_encoding:SinePositionEncoding
keras_hub.layers.TransformerEncoder              keras_hub.src.layers.modeling.transformer_encoder:TransformerEncoder
keras_nlp.layers.SinePositionEncoding            keras_nlp.src.layers.modeling.sine_position_encoding:SinePositionEncoding
keras_nlp.layers.TransformerEncoder              keras_nlp.src.layers.modeling.transformer_encoder:TransformerEncoder
sklearn.metrics.f1_score                         sklearn.metrics._classification:f1_score
sklearn.metrics.fbeta_score                      sklearn.metrics._classification:fbeta_score
sklearn.metrics.precision_recall_fscore_support  sklearn.metrics._classification:precision_recall_fscore_support
sklearn.metrics.classification_report            sklearn.metrics._classification:classification_report
sklearn.metrics.jaccard_score                    sklearn.metrics._classification:jaccard_score
keras.layers.GlobalAveragePooling1D              keras.src.layers.pooling.global_average_pooling1d:GlobalAveragePooling1D
tf_keras.layers.GlobalAveragePooling1D           tf_keras.src.layers.pooling.global_average_pooling1d:GlobalAveragePooling1D
tfm.vision.layers.PositionalEncoding             official.vision.modeling.layers.nn_layers:PositionalEncoding
official.legacy.transformer.model_utils.get_position_encoding  official.legacy.transformer.model_utils:get_position_encoding
torch.nn.MultiheadAttention                      torch.nn.modules.activation:MultiheadAttention
torch.nn.MultiheadAttention                      torch.ao.nn.quantizable.modules.activation:MultiheadAttention
torch.nn.TransformerEncoderLayer                 torch.nn.modules.transformer:TransformerEncoderLayer
torch.nn.functional.multi_head_attention_forward  torch.nn.functional:multi_head_attention_forward
torch.nn.functional.scaled_dot_product_attention  torch.nn.functional:scaled_dot_product_attention
torch.nn.functional.scaled_dot_product_attention  torch._C._nn:scaled_dot_product_attention
torch_geometric.nn.GCNConv                       torch_geometric.nn.conv.gcn_conv:GCNConv
torch_geometric.utils.gcn_norm                   torch_geometric.nn.conv.gcn_conv:gcn_norm
torch_geometric.nn.SAGEConv                      torch_geometric.nn.conv.sage_conv:SAGEConv
torch_geometric.nn.GraphConv                     torch_geometric.nn.conv.graph_conv:GraphConv
torch_geometric.nn.SimpleConv                    torch_geometric.nn.conv.simple_conv:SimpleConv
torch_geometric.nn.DenseGCNConv                  torch_geometric.nn.dense.dense_gcn_conv:DenseGCNConv
torch_geometric.nn.DenseSAGEConv                 torch_geometric.nn.dense.dense_sage_conv:DenseSAGEConv
torch_geometric.nn.DenseGraphConv                torch_geometric.nn.dense.dense_graph_conv:DenseGraphConv
torch_geometric.nn.GATConv                       torch_geometric.nn.conv.gat_conv:GATConv
torch_geometric.nn.GATv2Conv                     torch_geometric.nn.conv.gatv2_conv:GATv2Conv
torch_geometric.nn.DenseGATConv                  torch_geometric.nn.dense.dense_gat_conv:DenseGATConv
torch_geometric.nn.global_add_pool               torch_geometric.nn.pool.glob:global_add_pool
torch_geometric.nn.global_mean_pool              torch_geometric.nn.pool.glob:global_mean_pool
torch_geometric.nn.global_max_pool               torch_geometric.nn.pool.glob:global_max_pool
torch_geometric.nn.aggr.SumAggregation           torch_geometric.nn.aggr.basic:SumAggregation
torch_geometric.nn.aggr.MeanAggregation          torch_geometric.nn.aggr.basic:MeanAggregation
torch_geometric.nn.aggr.MaxAggregation           torch_geometric.nn.aggr.basic:MaxAggregation
torch_geometric.utils.softmax                    torch_geometric.utils._softmax:softmax
lablib.graphs.segment_softmax                    lablib.graphs:segment_softmax
lablib.graphs.gcn_norm                           lablib.graphs:gcn_norm
lablib.graphs.gcn_norm_dense                     lablib.graphs:gcn_norm_dense
torch_geometric.utils.get_laplacian              torch_geometric.utils.laplacian:get_laplacian
torch_geometric.nn.encoding.PositionalEncoding   torch_geometric.nn.encoding:PositionalEncoding
tf.saved_model.load                              tensorflow.python.saved_model.load:load
tf.saved_model.load                              tensorflow.python.saved_model.load:load_partial
tf_keras.models.load_model                       tf_keras.src.saving.saving_api:load_model
tf.lite.Interpreter                              tensorflow.lite.python.interpreter:Interpreter
"""
#: The rows of :data:`_READY_MADE_ROWS` that load a saved or exported TensorFlow definition:
#: lablib's function traced and saved in a graded cell, loaded only when the test calls
#: the student's function, ran as a graph that records none of its code (a red team: Lab
#: 3's gcn_edges 4/4 and Lab 4's gat_attention 6/6). A piece written by hand loads none.
#: Not rows: ``tf.graph_util.import_graph_def`` and ``tf.compat.v1.saved_model.load``,
#: which TensorFlow wraps in its deprecation decorator, whose code every deprecated
#: function shares (an honest graph's operations made under any of them were named a
#: crib); a graph definition held is a crib all the same (:data:`_DEFINITIONS`).
_LOADERS = frozenset({"tf.saved_model.load", "tf_keras.models.load_model", "tf.lite.Interpreter"})


def _name_module_attribute(rows: str) -> tuple[tuple[str, str, str], ...]:
    """``name  module:attribute`` lines -> ``(name, module, attribute)``, in order."""
    return tuple(
        (name, *where.split(":", 1)) for name, where in map(str.split, rows.strip().splitlines())
    )


#: :data:`_READY_MADE_ROWS` as ``(name, module, attribute)``. Disarmed while a by-hand
#: probe runs, whether their module was loaded before it or is imported during it.
READY_MADE = _name_module_attribute(_READY_MADE_ROWS)

#: How long the window waits for threads the student's code started (seconds, in all).
THREAD_WAIT = 1.0

#: Code shorter than this (instructions) is not compared as a copy: a one-line helper
#: written by anyone looks like one written by lablib.
_COPY_MIN_STEPS = 20

#: How many objects the search of the graded names' objects visits at most.
_WALK_LIMIT = 50_000

#: Top-level packages whose classes and objects the search does not enter (their members
#: are library code, not the student's), beyond the names in ``sys.stdlib_module_names``.
_LIBRARIES = frozenset(
    {
        "numpy",
        "tensorflow",
        "keras",
        "tf_keras",
        "official",
        "tensorflow_models",
        "keras_hub",
        "keras_nlp",
        "sklearn",
        "scipy",
        "pandas",
        "jax",
        "torch",
        "lablib",
        "google",
        "absl",
        "h5py",
        "ml_dtypes",
        "optree",
        "matplotlib",
    }
)


@dataclasses.dataclass(frozen=True)
class Crib:
    """What a by-hand probe was found using.

    Attributes:
        name: what was used (``lablib.layers.attention.scaled_dot_product_attention``,
            ``keras.layers.MultiHeadAttention``, ``gc.get_objects``, a file's path).
        kind: ``lablib`` (lablib's own implementation), ``reference`` (a spec's
            reference or judge), ``ready-made`` (:data:`READY_MADE`), ``copy`` (code copied
            from ``name``), ``file`` (reading a guarded file), ``compiled`` (compiling code
            under a guarded file's name), ``refused`` (an operation a by-hand probe may not
            do), ``graph`` (a TensorFlow graph whose code cannot be told: :data:`UNTRACED`),
            ``thread`` (a thread left running) or ``tamper`` (the grading code itself
            changed: :func:`verify`). A graph traced from lablib's code or a ready-made
            class is ``lablib``, ``reference`` or ``ready-made``, its name saying so.
    """

    name: str
    kind: str

    def __str__(self) -> str:
        return self.name


class CribCall(BaseException):
    """Raised where a by-hand piece's code reached what it must write itself: a disarmed
    function or an operation the window refuses. A BaseException, so that an ``except
    Exception`` in the student's code does not swallow it; the crib is noted when it is
    created, so swallowing it with ``except BaseException`` gains nothing either."""

    def __init__(self, crib):
        crib = crib if isinstance(crib, Crib) else Crib(str(crib), "lablib")
        super().__init__(crib.name)
        self.crib = crib
        window = _ACTIVE[0]
        if window is not None:
            window.note(crib)


# --------------------------------------------------------------------- lablib's code


def _package_dirs() -> tuple[str, ...]:
    """lablib's folder as its modules' code names it: as imported (this file's path, three
    levels up) and resolved (links followed), which differ where lablib lies behind a link."""
    from lablib._version import PACKAGE_DIR

    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return tuple(
        dict.fromkeys(
            (
                here + os.sep,
                os.path.abspath(str(PACKAGE_DIR)) + os.sep,
                os.path.realpath(str(PACKAGE_DIR)) + os.sep,
            )
        )
    )


def _codes(code):
    """``code`` and the code objects nested in its constants."""
    stack = [code]
    while stack:
        code = stack.pop()
        yield code
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))


def _qualified(module_code):
    """``(code, qualified name)`` for a module's code and the code nested in it: the code's
    ``co_qualname`` (Python 3.11+), or the same name built from the nesting (3.10)."""
    stack = [(module_code, "<module>")]
    while stack:
        code, qualname = stack.pop()
        yield code, getattr(code, "co_qualname", qualname)
        function = (
            bool(code.co_flags & 0x02) and code.co_name != "<module>"
        )  # CO_NEWLOCALS: not a class body
        for inner in code.co_consts:
            if isinstance(inner, types.CodeType):
                if qualname == "<module>":
                    name = inner.co_name
                else:
                    name = (
                        f"{qualname}.<locals>.{inner.co_name}"
                        if function
                        else f"{qualname}.{inner.co_name}"
                    )
                stack.append((inner, name))


_NOT_FUNCTIONS = frozenset(
    {"<module>", "<lambda>", "<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>"}
)


def _const_key(value):
    if isinstance(value, types.CodeType):
        return ("code", fingerprint(value))
    if isinstance(value, (tuple, frozenset)):
        items = tuple(_const_key(v) for v in value)
        return (
            type(value).__name__,
            items if isinstance(value, tuple) else tuple(sorted(map(repr, items))),
        )
    return (type(value).__name__, repr(value))


_DROPPED = frozenset({"CACHE", "NOP", "RESUME", "EXTENDED_ARG", "PRECALL", "PUSH_NULL"})
_FINGERPRINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fingerprint(code) -> tuple:
    """What two copies of one function's code share, whatever their file, name, lines,
    comments, docstring and local variable names: its instructions (names used, constants
    (nested code compared the same way), jumps counted in instructions, locals by slot)
    and its signature's shape. Compiled alone (``inspect.getsource`` + ``exec``), a
    function calls a module's function with ``LOAD_METHOD`` where its module compiled it
    with ``LOAD_ATTR``: both count as one attribute load."""
    known = _FINGERPRINTS.get(code)
    if known is not None:
        return known
    import dis

    instructions = [i for i in dis.get_instructions(code) if i.opname not in _DROPPED]
    position = {i.offset: n for n, i in enumerate(instructions)}
    steps = []
    for i in instructions:
        name = "LOAD_ATTR" if i.opname == "LOAD_METHOD" else i.opname
        if i.opcode in dis.hasjrel or i.opcode in dis.hasjabs:
            arg = position.get(i.argval, -1)
        elif i.opcode in dis.hasconst:
            arg = _const_key(i.argval)
        elif i.opcode in dis.hasname:
            arg = i.argval
        elif i.opcode in dis.haslocal or i.opcode in dis.hasfree:
            arg = i.arg
        else:
            arg = i.argrepr or i.arg
        steps.append((name, arg))
    found = (
        tuple(steps),
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        len(code.co_freevars),
        code.co_flags & 0x0F,
    )
    _FINGERPRINTS[code] = found
    return found


def _comparable(code) -> bool:
    """Long enough to be compared as a copy (:data:`_COPY_MIN_STEPS`), and a function."""
    return code.co_name not in _NOT_FUNCTIONS and len(fingerprint(code)[0]) >= _COPY_MIN_STEPS


def _copy_name(code, candidates) -> str | None:
    """The name of the function ``code`` (or code nested in it) copies, or None:
    ``candidates(sketch)`` gives the ``(fingerprint, name)`` of the originals with that
    :func:`_sketch`; only code with candidates and long enough (:func:`_comparable`) is
    fingerprinted. lablib's copies (:meth:`Catalogue.copied`) and the ready-made ones
    (:func:`_ready_name`)."""
    for inner in _codes(code):
        if inner.co_name in _NOT_FUNCTIONS:
            continue
        printed = None
        for original, name in candidates(_sketch(inner)):
            if printed is None:
                if not _comparable(inner):
                    break
                printed = fingerprint(inner)
            if original == printed:
                return name
    return None


def _sketch(code) -> tuple:
    """What a copy shares with its original and costs nothing to read (the names it uses,
    its signature's and locals' counts): only code with the same sketch is fingerprinted."""
    return (code.co_names, code.co_argcount, code.co_kwonlyargcount, code.co_nlocals)


class Catalogue:
    """lablib's guarded code, compiled from its files (never from the modules in memory,
    which student code may have changed): every code object by value, with its dotted
    name, and the fingerprints of its functions (:func:`fingerprint`)."""

    def __init__(self, parts):
        self.roots = _package_dirs()
        real_root = os.path.realpath(self.roots[-1]) + os.sep
        self.folders = tuple(
            dict.fromkeys(
                os.path.realpath(root + part) + os.sep for root in self.roots for part in parts
            )
        )
        self.modules = tuple("lablib." + part.rstrip(os.sep).replace(os.sep, ".") for part in parts)
        self.names: dict = {}  # code object (by value) -> dotted name
        self.owners: dict = {}  # code object (by value) -> its module's dotted name
        self.sketches: dict = {}  # _sketch -> [(code, dotted name)]: fingerprinted on demand
        self.bytecodes: set[bytes] = set()  # the functions' raw bytecode
        self.files: set[str] = set()  # real paths of the guarded files
        self.module_names: list[str] = []  # their modules' dotted names
        self.basenames: set[str] = set()
        self._module_files: dict[
            str, bool
        ] = {}  # a module's __file__ -> guarded (paths resolved once)
        self._modules: dict[int, tuple] = {}  # id -> (module, guarded)
        self._unloadable: set[str] = set()
        self.file_modules: dict[str, str] = {}  # real path -> its module's dotted name
        self._spans: dict | None = None  # real path -> its functions' lines (code_at)
        for folder in self.folders:
            for directory, subdirs, files in os.walk(folder):
                subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
                for file in sorted(files):
                    if file.endswith(".py"):
                        self._add(os.path.join(directory, file), real_root)

    def _add(self, path: str, real_root: str) -> None:
        real = os.path.realpath(path)
        self.files.add(real)
        self.basenames.add(os.path.basename(real))
        module = os.path.splitext(os.path.relpath(real, real_root))[0].replace(os.sep, ".")
        module = "lablib." + module.removesuffix(".__init__")
        self.module_names.append(module)
        self.file_modules[real] = module
        with open(real, "rb") as handle:
            source = handle.read()
        for code, qualname in _qualified(compile(source, real, "exec", dont_inherit=True)):
            name = _label(module, qualname)
            self.names.setdefault(code, name)
            self.owners.setdefault(code, module)
            if code.co_name not in _NOT_FUNCTIONS:
                self.sketches.setdefault(_sketch(code), []).append((code, name))
                self.bytecodes.add(code.co_code)

    def name_of(self, code) -> str | None:
        """The dotted name of lablib's code object ``code`` (compared by value), or None.
        A gate put in place of lablib's code (:func:`_disarm`) is named as the code it
        replaced: a function disarmed by the seal (:func:`seal`) is still lablib's."""
        gated = _GATED.get(id(code))
        if gated is not None and gated[0] is code:
            code = gated[1]
        try:
            return self.names.get(code)
        except TypeError:
            return None

    def copied(self, code) -> str | None:
        """The dotted name of the lablib function ``code`` (or code nested in it) copies,
        or None; lablib's own code is :meth:`name_of`'s."""
        sketches = self.sketches
        return _copy_name(
            code, lambda sketch: ((fingerprint(c), n) for c, n in sketches.get(sketch, ()))
        )

    def lablib_code(self, code) -> str | None:
        """``code`` or code nested in it is lablib's guarded code or a copy of it: its name."""
        for inner in _codes(code):
            name = self.name_of(inner)
            if name is not None:
                return name
        return self.copied(code)

    def guarded_path(self, path) -> bool:
        """``path`` (as given to ``open`` or ``compile``) is a guarded file or lies in a
        guarded folder, once ``.``, ``..`` and links are resolved."""
        if isinstance(path, int):
            return False
        try:
            path = os.fsdecode(os.fspath(path))
        except TypeError:
            return False
        if not path or path.startswith("<"):
            return False
        real = os.path.realpath(path)
        return real in self.files or (real + os.sep).startswith(self.folders)

    def guarded_module(self, name: str) -> bool:
        return any(name == m or name.startswith(m + ".") for m in self.modules)

    def module_is_guarded(self, module) -> bool:
        """A module loaded from a guarded file (under any name and path)."""
        file = getattr(module, "__dict__", {}).get("__file__")
        if not isinstance(file, str):
            return False
        if os.path.basename(file) not in self.basenames:
            return False
        return self.known_path(file)

    def known_path(self, path: str) -> bool:
        """:meth:`guarded_path` for a path met before (a module's file, a linecache key),
        resolved once."""
        known = self._module_files.get(path)
        if known is None:
            known = self._module_files[path] = self.guarded_path(path)
        return known

    def code_at(self, path, line) -> str | None:
        """The dotted name of the guarded code a frame of a traceback ran, from its file and
        line (the innermost function whose lines hold it, else the file's module), or None
        where the file is not guarded."""
        if not isinstance(path, str) or not self.known_path(path):
            return None
        if self._spans is None:
            self._spans = _spans_by_file(self.names.items())
        real = _realpath(path)
        return _innermost(self._spans.get(real, ()), line) or self.file_modules.get(real, real)

    def preload(self) -> None:
        """Import the guarded modules not imported yet, so that they are disarmed with the
        rest rather than imported while a probe runs (where their own import-time calls
        would meet the disarmed functions). lablib's layers only once TensorFlow is
        imported (the process has chosen its Keras); a module that fails to import is
        left for the import gate."""
        import importlib

        for name in self.module_names:
            if name in sys.modules or name in self._unloadable:
                continue
            if name.startswith("lablib.layers") and "tensorflow" not in sys.modules:
                continue
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - imported (and disarmed) in the window, if ever
                self._unloadable.add(name)

    def loaded_modules(self) -> list:
        """The modules in ``sys.modules`` loaded from a guarded file, under any name."""
        found = []
        for module in list(sys.modules.values()):
            entry = self._modules.get(id(module))
            if entry is None or entry[0] is not module:  # kept alive by the entry: ids stay unique
                entry = self._modules[id(module)] = (module, self.module_is_guarded(module))
            if entry[1]:
                found.append(module)
        return found


@functools.lru_cache(maxsize=4)
def catalogue(parts: tuple[str, ...] = BY_HAND) -> Catalogue:
    """The :class:`Catalogue` of ``parts`` (built once per process)."""
    return Catalogue(parts)


def _label(module: str, qualname: str) -> str:
    """The dotted name students know for code ``qualname`` of ``module``: a class's
    constructor, ``call`` or ``build`` is the class itself."""
    if qualname == "<module>":
        return module
    owner, _, method = qualname.rpartition(".")
    if (
        owner
        and not owner.endswith("<locals>")
        and method in ("__init__", "__new__", "__call__", "call", "build")
    ):
        return f"{module}.{owner}"
    return f"{module}.{qualname}"


def _kind(name: str) -> str:
    return "reference" if ".grading." in f".{name}" else "lablib"


# --------------------------------------------------------------------- what is reached


def _library(obj) -> bool:
    """A class, function or object of a library (its members are not the student's)."""
    module = (
        getattr(obj, "__module__", None)
        if isinstance(obj, (type, types.FunctionType))
        else getattr(type(obj), "__module__", None)
    )
    if not isinstance(module, str):
        return False
    top = module.partition(".")[0]
    return top in _LIBRARIES or top in getattr(sys, "stdlib_module_names", ()) or top == "builtins"


def _ready_made() -> dict:
    """id -> (name, object) of the ready-made classes and functions that are loaded now
    (a function's wrapped originals included), and torch's attention operators."""
    found = {}
    for namespace, op in _aten_ops():
        obj = vars(namespace).get(op)
        if obj is not None:
            found[id(obj)] = (f"torch.ops.aten.{op}", obj)
    for name, module_name, attribute in READY_MADE:
        module = sys.modules.get(module_name)
        obj = getattr(module, "__dict__", {}).get(attribute) if module is not None else None
        while obj is not None and id(obj) not in found:
            found[id(obj)] = (name, obj)
            obj = getattr(obj, "__wrapped__", None) if isinstance(obj, types.FunctionType) else None
    return found


def _code_key(code) -> tuple:
    """What tells a code object apart, without the object (a table of them holds none:
    read from the guard's state, a ready-made original was made into a working function):
    its bytecode, names and place. Only the same source's code has it; a copy made with
    ``code.replace`` under another name or place does not, and is found by its fingerprint
    (:func:`_ready_code_names`) where it is long enough and computes (matched by
    instructions and names alone, whatever their length, a tf_keras ``Dropout``'s
    ``lambda: tf.identity(x)`` and a student's ``compute_output_shape`` were taken for
    ``Attention``'s)."""
    return (
        code.co_code,
        code.co_name,
        getattr(code, "co_qualname", code.co_name),
        code.co_filename,
        code.co_firstlineno,
    )


#: The methods of a ready-made class whose copies are not looked for (:func:`_ready_code_names`):
#: what sets a layer, module or metric up, converts or describes it, which honest code
#: copies (a layer's ``get_config``, a module's ``reset_parameters``; Keras's
#: ``Metric.reset_state`` has ``FBetaScore.reset_state``'s very instructions and names).
#: Their own code is still recognised.
_SET_UP_ONLY = frozenset(
    {
        "__init__",
        "__setstate__",
        "_reset_parameters",
        "dequantize",
        "from_float",
        "reset_parameters",
        "build",
        "_build",
        "_build_attention",
        "_build_from_signature",
        "_get_common_kwargs_for_sublayer",
        "_make_output_dense",
        "_validate_call_args",
        "_validate_inputs",
        "compute_mask",
        "compute_output_shape",
        "compute_output_spec",
        "from_config",
        "get_config",
        "reset_state",
    }
)


def _ready_code_names(pairs, table: dict | None = None) -> dict:
    """``table`` (a new one by default) with the :func:`_code_key` of the code of every
    function of the ready-made ``(name, object)`` pairs (a class's methods; their nested
    code too) -> its name. Read before they are disarmed: a function made on that code (a
    clone made in a graded cell, a code object kept there) is a ready-made crib. And for
    copies (``code.replace`` under another name or place, the source copied and renamed):
    ``("copy", sketch)`` -> ``[(fingerprint, name)]`` of each function long enough to be
    compared (:func:`_comparable`) and not :data:`_SET_UP_ONLY`, as lablib's own are
    (:meth:`Catalogue.copied`). Fingerprints, never the code objects."""
    table = {} if table is None else table
    for name, obj in pairs:
        # only code written in the row's own module: a decorator's wrapper (Keras's
        # traceback filter, sklearn's parameter check) shares its code with every function
        # it wraps, and a function on that code is no crib
        home = getattr(sys.modules.get(getattr(obj, "__module__", None) or ""), "__file__", None)
        if not isinstance(home, str):
            continue
        home = _realpath(home)
        for member in _members(obj) if isinstance(obj, type) else [obj]:
            if isinstance(member, types.FunctionType):
                gated = _GATED.get(id(member.__code__))
                if gated is not None and gated[0] is member.__code__:
                    continue  # disarmed already: its code was read when it was
                for inner in _codes(member.__code__):
                    if _realpath(inner.co_filename) == home:
                        table.setdefault(_code_key(inner), name)
                        if member.__name__ not in _SET_UP_ONLY and _comparable(inner):
                            copies = table.setdefault(("copy", _sketch(inner)), [])
                            if (original := (fingerprint(inner), name)) not in copies:
                                copies.append(original)
    return table


def _ready_name(table: dict, code) -> str | None:
    """The ready-made name of ``code`` or code nested in it, the code itself or a copy
    (:func:`_ready_code_names`)."""
    if not table:
        return None
    for inner in _codes(code):
        name = table.get(_code_key(inner))
        if name is not None:
            return name
    return _copy_name(code, lambda sketch: table.get(("copy", sketch), ()))


def _names_used(code) -> set[str]:
    names = set()
    for inner in _codes(code):
        names.update(inner.co_names)
    return names


_GLOBAL_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})
_GLOBALS_READ: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _global_names(code) -> frozenset:
    """The names ``code`` (or code nested in it) reads as a global or builtin: an
    attribute's name (``self.w``) is none of them, whatever global bears it."""
    known = _GLOBALS_READ.get(code)
    if known is None:
        import dis

        known = _GLOBALS_READ[code] = frozenset(
            i.argval
            for inner in _codes(code)
            for i in dis.get_instructions(inner)
            if i.opname in _GLOBAL_LOADS
        )
    return known


def _code_of(function):
    """A function's code, or where a gate took its place (:func:`_disarm`), the code the
    gate replaced: what the function reaches is read from it (a probe's helpers, sealed)."""
    code = function.__code__
    gated = _GATED.get(id(code))
    # a ready-made function disarmed by the seal keeps no original: its gate is read
    return gated[1] if gated is not None and gated[0] is code and gated[1] is not None else code


def _function_links(function, names=None):
    """What a function reaches: its closure, defaults, ``__wrapped__`` and attributes, and
    the globals (or builtins) its code reads, with the attributes of a module it names
    that its code also names (``layers.positional_encoding``). A module held in a closure
    cell, a default or an attribute of the function is followed the same way: the code
    reaches it under a name that is no global (``m.masked_softmax``, ``m`` a free variable)."""
    out = []
    for cell in function.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            pass
    out.extend(function.__defaults__ or ())
    out.extend((function.__kwdefaults__ or {}).values())
    out.extend(getattr(function, "__dict__", {}).values())
    modules = [value for value in out if isinstance(value, types.ModuleType)]
    code = _code_of(function)
    read = _global_names(code) if names is None else names
    names = _names_used(code) if names is None else names
    scopes = [function.__globals__]
    builtins_ = getattr(function, "__builtins__", None)
    if isinstance(builtins_, dict):
        scopes.append(builtins_)
    for name in read:
        for scope in scopes:
            if name in scope:
                value = scope[name]
                out.append(value)
                if isinstance(value, types.ModuleType):
                    modules.append(value)
                break
    seen = set()
    while modules:
        module = modules.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        namespace = getattr(module, "__dict__", {})
        for name in names:
            if name in namespace:  # never getattr: a lazy module would import on access
                value = namespace[name]
                out.append(value)
                if isinstance(value, types.ModuleType):
                    modules.append(value)
    return out


def _members(klass):
    out = []
    for value in vars(klass).values():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            out.extend(f for f in (value.fget, value.fset, value.fdel) if f is not None)
        elif isinstance(value, functools.cached_property):
            out.append(value.func)
        else:
            out.append(value)
    return out


_SKIP = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    bytearray,
    range,
    slice,
    type(Ellipsis),
    types.BuiltinFunctionType,
    types.CodeType,
)


class _Search:
    """One pass over what some objects reach (:func:`_function_links`, class members and
    bases, containers, instances' attributes), noting lablib's guarded code, copies of
    it and ready-made classes. Where cribs are flagged, it also looks into TensorFlow's
    objects (``tf.Module``, Keras layers, ``tf.function``, concrete functions, graphs)
    for graphs made from that code (:meth:`_graph_crib`). A hostile object's attributes
    may raise: such an object is passed over.

    ``probe_reached``: the functions the probe's own code reaches (:func:`probe_functions`):
    a graph that ran them is not a crib in this probe."""

    def __init__(
        self, catalogue_: Catalogue, ready: dict, exempt: set, probe_reached=(), ready_codes=None
    ):
        self.catalogue = catalogue_
        self.ready = ready
        self.ready_codes = ready_codes or {}  # _ready_code_names: clones of ready-made code
        self.exempt = exempt
        self.seen: set[int] = set()
        self.functions: list = []  # lablib's code (or copies) reached, to disarm
        self.classes: list = []  # lablib's classes reached, to disarm
        self.modules: list = []  # modules loaded from guarded files
        self.first: Crib | None = None
        self.tf = _tf_classes()
        self.holders = tuple(self.tf[r] for r in ("trackable", "session") if r in self.tf)
        self.graphs = tuple(self.tf[r] for r in ("graph", "atomic", "trackable") if r in self.tf)
        self._probe_reached = tuple(probe_reached)
        self._exempt_names: set | None = None
        self._ready_spans: dict | None = None

    def _found(self, crib: Crib) -> None:
        if self.first is None:
            self.first = crib

    def run(self, roots, flag: bool = True) -> None:
        stack = list(roots)
        while stack and len(self.seen) < _WALK_LIMIT:
            obj = stack.pop()
            if flag and type(obj) is types.CodeType and id(obj) not in self.seen:
                # lablib's code object kept as a value (a global, a default, a container):
                # a function made from it in the window (MAKE_FUNCTION, ctypes) announces
                # nothing to the audit hook
                self.seen.add(id(obj))
                name = self.catalogue.lablib_code(obj)
                if name is not None:
                    own = self.catalogue.name_of(obj) is not None
                    self._found(Crib(name, _kind(name) if own else "copy"))
                elif (ready := _ready_name(self.ready_codes, obj)) is not None:
                    self._found(Crib(ready, "ready-made"))
                continue
            if id(obj) in self.seen:
                continue
            if isinstance(obj, _SKIP):
                if id(obj) in self.ready:  # a ready-made builtin (torch's attention)
                    self.seen.add(id(obj))
                    if flag:
                        self._found(Crib(self.ready[id(obj)][0], "ready-made"))
                continue
            self.seen.add(id(obj))
            try:
                stack.extend(self._visit(obj, flag))
            except Exception:  # noqa: BLE001 - a hostile object: not lablib's code
                continue

    def _visit(self, obj, flag):
        ready = self.ready.get(id(obj))
        if ready is not None:
            if flag:
                self._found(Crib(ready[0], "ready-made"))
            return ()
        if isinstance(obj, types.FunctionType):
            if id(obj) in self.exempt:
                return ()
            name = self.catalogue.name_of(obj.__code__)
            copied = None if name is not None else self.catalogue.copied(obj.__code__)
            if name is not None or copied is not None:
                self.functions.append(obj)
                if flag:
                    self._found(
                        Crib(name, _kind(name)) if name is not None else Crib(copied, "copy")
                    )
                return ()
            ready = _ready_name(self.ready_codes, obj.__code__)
            if ready is not None:  # a function made on a ready-made function's code
                self.functions.append(obj)
                if flag:
                    self._found(Crib(ready, "ready-made"))
                return ()
            return () if _library(obj) else _function_links(obj)
        if isinstance(obj, types.MethodType):
            return (obj.__func__, obj.__self__)
        if isinstance(obj, functools.partial):
            return (obj.func, *obj.args, *obj.keywords.values())
        if isinstance(obj, (staticmethod, classmethod)):
            return (obj.__func__,)
        if isinstance(obj, property):
            return (obj.fget, obj.fset, obj.fdel)
        if isinstance(obj, type):
            return self._class(obj, flag)
        if isinstance(obj, types.ModuleType):
            if self.catalogue.module_is_guarded(obj):
                self.modules.append(obj)
                return ()
            if sys.modules.get(getattr(obj, "__name__", None)) is obj:
                return ()  # an imported module's members count where code names them (_function_links)
            if type(obj) is not types.ModuleType and _library(obj):
                # a library's module-like object (torch.ops.aten, which caches every operator
                # asked of it, the guard's own included: PyG's degree reached it and named
                # torch's attention): its members count where code names them, as above
                return ()
            return tuple(vars(obj).values())  # a module loaded privately: what it holds
        if isinstance(obj, (dict, weakref.WeakKeyDictionary, weakref.WeakValueDictionary)):
            return (*obj.keys(), *obj.values())
        if isinstance(obj, (list, tuple, set, frozenset)):
            return tuple(obj)
        if isinstance(obj, types.SimpleNamespace):
            return tuple(vars(obj).values())
        kind = type(obj)
        if kind.__module__ in ("numpy",) or hasattr(kind, "__array__"):
            return ()
        if flag and self.tf:
            held = self._tensorflow(obj)
            if held is not None:
                return held
        out = [kind]
        try:  # the instance's own attributes, never through its class's __getattr__ (no code of its runs)
            state = object.__getattribute__(obj, "__dict__")
        except AttributeError:
            state = None
        if isinstance(state, dict):
            if flag and isinstance(obj, self.holders):  # a tf.Module, Keras layer, tf.function
                out.extend(state.values())  # what it holds: functions, graphs, layers
            elif kind.__module__.startswith("tensorflow"):  # the Python function it traces,
                out.extend(  # and where cribs are flagged, a graph or function it holds
                    v
                    for v in state.values()
                    if isinstance(v, types.FunctionType) or (flag and isinstance(v, self.graphs))
                )
            elif not _library(obj):
                out.extend(state.values())
        return out

    def _tensorflow(self, obj):
        """What a TensorFlow graph, function or graph definition holds (to search next),
        after noting a crib it is; None for any other object. TensorFlow's own classes'
        methods are called, never a subclass's."""
        tf = self.tf
        kind = type(obj)
        if (kind.__module__, kind.__name__) in _DEFINITIONS:
            self._found(Crib(UNTRACED, "graph"))
            return ()
        if isinstance(obj, tf.get("graph", ())):
            crib = self._graph_crib(obj)
            if crib is not None:
                self._found(crib)
                return ()
            return list(object.__getattribute__(obj, "_functions").values())  # graphs it calls
        if isinstance(obj, tf.get("atomic", ())):  # what a concrete function runs
            slots = vars(tf["atomic"])  # its slots, read with the class's own descriptors
            graphs = [slots[n].__get__(obj) for n in ("_cached_graph", "_generated_graph")]
            if graphs == [None, None]:
                self._found(Crib(UNTRACED, "graph"))  # built from a FunctionDef
                return ()
            return [*graphs, *slots["_children"].__get__(obj)]
        if isinstance(obj, tf.get("cache", ())):  # a tf.function's traces
            return list(tf["cache"].values(obj))
        return None

    def _graph_crib(self, graph) -> Crib | None:
        """The crib a TensorFlow graph is: an operation made while lablib's guarded code
        (or a ready-made class's or function's) ran, as TensorFlow recorded it, named by
        the outermost such frame (what the traced code called); the probe's own functions,
        and what they call, do not count. Else operations that record no code
        (:data:`UNTRACED`)."""
        stacks, untraced = _graph_record(graph, self.tf["graph"])
        exempt = self._names_exempt()
        ready = None  # (row in READY_MADE, name) of the first row met
        for stack in sorted(stacks, key=repr):
            for path, line in stack:
                name = self.catalogue.code_at(path, line)
                if name in exempt:
                    break  # the probe's own function: what it calls is the probe's too
                if name is not None:
                    return Crib(f"{name} (traced into a TensorFlow graph)", _kind(name))
                if isinstance(path, str) and isinstance(line, int):
                    row = _innermost(self._ready_lines().get(_realpath(path), ()), line)
                    if row is not None:
                        ready = row if ready is None else min(ready, row)
                        break
        if ready is not None:
            return Crib(f"{ready[1]} (traced into a TensorFlow graph)", "ready-made")
        return Crib(UNTRACED, "graph") if untraced else None

    def _names_exempt(self) -> set:
        """The dotted names of lablib's code the probe's own functions hold."""
        if self._exempt_names is None:
            names = (
                self.catalogue.name_of(code)
                for function in self._probe_reached
                for code in _codes(function.__code__)
            )
            self._exempt_names = {name for name in names if name is not None}
        return self._exempt_names

    def _ready_lines(self) -> dict:
        """Real path -> the lines of the ready-made classes' methods and functions."""
        if self._ready_spans is None:
            pairs = []
            for row, (name, obj) in enumerate(self.ready.values()):  # in READY_MADE's order
                for member in _members(obj) if isinstance(obj, type) else [obj]:
                    if isinstance(member, types.FunctionType):
                        pairs.extend((code, (row, name)) for code in _codes(member.__code__))
            self._ready_spans = _spans_by_file(pairs)
        return self._ready_spans

    def _class(self, klass, flag):
        mro = getattr(klass, "__mro__", (klass,))
        for base in mro:
            ready = self.ready.get(id(base))
            if ready is not None:
                if flag:
                    self._found(Crib(ready[0], "ready-made"))
                return ()
            if _library(base) and not str(getattr(base, "__module__", "")).startswith("lablib"):
                continue
            for member in _members(base):
                if isinstance(member, types.FunctionType) and id(member) not in self.exempt:
                    module = self.catalogue.owners.get(member.__code__)
                    if module is not None:
                        self.classes.append(base)
                        if flag:  # named as lablib's code names it (its class, where
                            code = member.__code__  # that is this class), never by a name
                            qual = getattr(code, "co_qualname", code.co_name)  # chosen by
                            if qual.startswith(f"{base.__qualname__}."):  # the submission
                                qual = base.__qualname__
                            shown = f"{module}.{qual}"
                            self._found(Crib(shown, _kind(shown)))
                        return ()
        if _library(klass):
            return ()
        return [*_members(klass), *(b for b in mro[1:] if not _library(b))]


def probe_functions(probe, catalogue_: Catalogue, functions: list | None = None) -> set[int]:
    """The ids of the functions a probe's own code reaches (its helpers, the functions it
    hands to the student's code), found from its code: they stay callable while it runs.
    Only lablib's code (compared with its files) and hidden-test code (by module) are
    followed, so a spec's helper that student code replaced is not taken for the probe's.
    ``functions``, where given, receives the functions themselves."""
    reached: set[int] = set()
    stack = [probe]
    seen: set[int] = set()
    while stack and len(seen) < _WALK_LIMIT:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SKIP):
            continue
        seen.add(id(obj))
        try:
            if isinstance(obj, functools.partial):
                stack.extend((obj.func, *obj.args, *obj.keywords.values()))
            elif isinstance(obj, types.MethodType):
                stack.append(obj.__func__)
            elif isinstance(obj, type):
                if any(
                    isinstance(m, types.FunctionType) and catalogue_.name_of(m.__code__)
                    for m in _members(obj)
                ):
                    stack.extend(_members(obj))
            elif isinstance(obj, types.FunctionType):
                module = getattr(obj, "__module__", "") or ""
                if catalogue_.name_of(obj.__code__) is not None or module.startswith(
                    ("lablib_hidden_tests", "lablib_lab_files")
                ):
                    reached.add(id(obj))
                    if functions is not None:
                        functions.append(obj)
                    stack.extend(
                        v for v in _function_links(obj) if not isinstance(v, types.ModuleType)
                    )
            elif isinstance(obj, (tuple, list, set, frozenset)):
                stack.extend(obj)  # a case table: (graph builder, sizes, activation)
            elif isinstance(obj, dict):
                stack.extend(obj.values())
            elif callable(obj) and not isinstance(obj, types.BuiltinFunctionType):
                call = getattr(type(obj), "__call__", None)  # noqa: B004 - the method itself
                if isinstance(call, types.FunctionType):
                    stack.append(call)
        except Exception:  # noqa: BLE001
            continue
    return reached


# --------------------------------------------------------------------- TensorFlow graphs

#: The frame from which TensorFlow's tracing calls the Python function it turns into a
#: graph (``tf.function``, ``get_concrete_function``, ``tf.cond``'s branches,
#: ``wrap_function``): the frames outside it (a probe that called a traced function among
#: them) are not what the graph runs.
_TRACE_ENTRY = ("func_graph_from_py_func", os.sep + os.path.join("framework", "func_graph.py"))

#: Operations a graph rebuilt from a definition holds around what it computes (its inputs,
#: outputs and no-ops): not counted as untraced.
_PLUMBING = frozenset({"Placeholder", "Identity", "IdentityN", "NoOp"})

#: What a by-hand piece reaches when it holds a TensorFlow graph or function whose
#: operations record no code (rebuilt from a ``FunctionDef`` or ``GraphDef``: a saved
#: model loaded, ``import_graph_def``), or such a definition itself.
UNTRACED = "a TensorFlow graph rebuilt from a saved or exported definition"

#: TensorFlow's classes the search looks into, by role (``module:attribute``), read from
#: the modules already imported (none before TensorFlow is).
_TF_CLASSES = (
    ("graph", "tensorflow.python.framework.ops:Graph"),
    ("atomic", "tensorflow.python.eager.polymorphic_function.atomic_function:AtomicFunction"),
    ("cache", "tensorflow.core.function.polymorphism.function_cache:FunctionCache"),
    ("trackable", "tensorflow.python.trackable.base:Trackable"),
    ("session", "tensorflow.python.client.session:BaseSession"),
)

#: The protocol buffers a graph is rebuilt from: ``(module, class)``.
_DEFINITIONS = frozenset(
    {
        ("tensorflow.core.framework.function_pb2", "FunctionDef"),
        ("tensorflow.core.framework.function_pb2", "FunctionDefLibrary"),
        ("tensorflow.core.framework.graph_pb2", "GraphDef"),
        ("tensorflow.core.protobuf.meta_graph_pb2", "MetaGraphDef"),
        ("tensorflow.core.protobuf.saved_model_pb2", "SavedModel"),
    }
)

_REALPATHS: dict[str, str] = {}


def _tf_classes() -> dict:
    """:data:`_TF_CLASSES` that are loaded: role -> class."""
    found = {}
    for role, where in _TF_CLASSES:
        module, _, attribute = where.partition(":")
        value = getattr(sys.modules.get(module), "__dict__", {}).get(attribute)
        if isinstance(value, type):
            found[role] = value
    return found


def _realpath(path: str) -> str:
    real = _REALPATHS.get(path)
    if real is None:
        real = _REALPATHS[path] = os.path.realpath(path)
    return real


def _spans_by_file(pairs) -> dict:
    """``(code, name)`` pairs -> real path -> ``[(first line, last line, name)]`` of the
    functions (a lambda's or comprehension's lines count as the function around them)."""
    spans: dict = {}
    for code, name in pairs:
        if code.co_name in _NOT_FUNCTIONS:
            continue
        lines = [line for _, _, line in code.co_lines() if line is not None]
        first = code.co_firstlineno
        spans.setdefault(_realpath(code.co_filename), []).append(
            (first, max(lines, default=first), name)
        )
    return spans


def _innermost(spans, line) -> str | None:
    """The name of the innermost span that holds ``line``, or None."""
    best = None
    for first, last, name in spans:
        if first <= line <= last and (best is None or first >= best[0]):
            best = (first, name)
    return None if best is None else best[1]


def _called_functions(operation) -> set[str]:
    """The names of the functions an operation calls (its function-valued attributes)."""
    names = set()
    for value in operation.node_def.attr.values():
        if value.HasField("func"):
            names.add(value.func.name)
        names.update(f.name for f in value.list.func)
    return names


def _graph_library(graph, graph_class) -> set[str]:
    """The names of the functions ``graph`` and the graphs around it hold."""
    names: set[str] = set()
    for _ in range(64):
        if not isinstance(graph, graph_class):
            break
        names.update(object.__getattribute__(graph, "_functions"))
        try:
            graph = object.__getattribute__(graph, "outer_graph")
        except AttributeError:
            break
    return names


def _graph_record(graph, graph_class) -> tuple[frozenset, bool]:
    """What TensorFlow recorded of the code that made ``graph``'s operations: the stacks
    they were made from, each a tuple of frames ``(file, line)``, outermost first, from the
    tracing entry on (:data:`_TRACE_ENTRY`: the callers of a traced function, a probe among
    them, do not count), and whether an operation records no code (rebuilt from a
    definition) or calls a function that neither the graph nor a graph around it holds.
    An operation made outside a trace (a graph built op by op, TensorFlow 1's way) is not
    read: TensorFlow keeps its frames' code objects by address without holding them, so a
    frame of a graded cell that has since ended can read as the code that reuses its
    memory (a guarded file's, compiled later), which flagged an honest graph as a crib.
    Read anew for each search (a record kept between searches could be edited);
    ``graph_class``'s own methods are called, never a subclass's."""
    stacks: set = set()
    called: set = set()
    untraced = False
    for operation in graph_class.get_operations(graph):
        trace = operation.traceback
        if trace is None:
            untraced = untraced or operation.type not in _PLUMBING
        else:
            trace = list(trace)
            start = None
            for index in range(len(trace) - 1, -1, -1):
                frame = trace[index]
                if frame.name == _TRACE_ENTRY[0] and frame.filename.endswith(_TRACE_ENTRY[1]):
                    start = index + 1
                    break
            if start is not None:  # a graph built outside a trace (TF1's): not read
                stacks.add(tuple((frame.filename, frame.lineno) for frame in trace[start:]))
        called |= _called_functions(operation)
    return frozenset(stacks), untraced or bool(called - _graph_library(graph, graph_class))


# --------------------------------------------------------------------- disarming


def _parameters(code) -> str:
    """The parameter list of ``code`` without defaults (they stay on the function object):
    ``a, /, b, *args, c, **kwargs``."""
    names = code.co_varnames
    positional = list(names[: code.co_argcount])
    kwonly = list(names[code.co_argcount : code.co_argcount + code.co_kwonlyargcount])
    index = code.co_argcount + code.co_kwonlyargcount
    params = positional[: code.co_posonlyargcount]
    if code.co_posonlyargcount:
        params.append("/")
    params += positional[code.co_posonlyargcount :]
    if code.co_flags & 0x04:  # *args
        params.append("*" + names[index])
        index += 1
    elif kwonly:
        params.append("*")
    params += kwonly
    if code.co_flags & 0x08:  # **kwargs
        params.append("**" + names[index])
    return ", ".join(params)


def _gate_code(function, crib: Crib):
    """Code for ``function`` that raises ``CribCall(crib)``: the same parameters (Keras
    reads a layer's ``__init__`` signature before calling it) and as many free variables
    (a function's closure keeps its size), referenced after the raise, where no call
    reaches them. The raiser and the name are constants of the code (the folded
    ``("__CRIB__",)[0]`` is replaced), never looked up in the function's module, which
    student code can write to."""
    import warnings

    code = function.__code__
    params = _parameters(code)
    free = [f"_lablib_cell_{i}" for i in range(len(code.co_freevars))]
    while set(free) & set(code.co_varnames):
        free = ["_" + n for n in free]
    lines = [
        "def outer():",
        *(f"    {n} = None" for n in free),
        f"    def gate({params}):",
        "        raise ('__CRIB__',)[0]('__NAME__')",
    ]
    if free:
        lines.append(f"        ({', '.join(free)},)")
    lines.append("    return gate")
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "'str' object is not callable"
        exec(compile("\n".join(lines) + "\n", "<lablib crib guard>", "exec"), namespace)
    gate = namespace["outer"]().__code__
    swap = {"__CRIB__": CribCall, "__NAME__": crib}
    consts = tuple(swap.get(c, c) if isinstance(c, str) else c for c in gate.co_consts)
    names = {"co_qualname": code.co_qualname} if hasattr(code, "co_qualname") else {}
    return gate.replace(co_consts=consts, co_name=code.co_name, **names)


_GATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: id(gate) -> (the gate, the code it replaced, its Crib): what a gate stands for
#: (:meth:`Catalogue.name_of`) and what a sealed probe's own functions get back for it.
_GATED: dict = {}


def _disarm(function, crib: Crib, saved: list, keep: bool = True) -> None:
    """``function``'s code swapped for a gate raising ``CribCall(crib)``; its original
    kept (in ``saved`` and :data:`_GATED`) only where ``keep``: what the seal never gives
    back, it does not keep (a ready-made function's original read from the seal's list
    was made into a working function: its code is no code of lablib's that the audit
    hook knows)."""
    if not isinstance(function, types.FunctionType) or function.__code__ is _GATES.get(function):
        return
    gate = _GATES.get(function)
    if gate is None or gate.co_name != function.__code__.co_name or crib not in gate.co_consts:
        gate = _GATES[function] = _gate_code(function, crib)
    original = function.__code__ if keep else None
    _GATED[id(gate)] = (gate, original, crib)
    saved.append((function, original))
    function.__code__ = gate


# --------------------------------------------------------------------- the window

_ACTIVE: list = [None]  # the open Window (one per process at a time)
_LOCK = threading.Lock()
_HOOKED: list = [False]
_LEFT_RUNNING: weakref.WeakSet = weakref.WeakSet()  # threads a probe left running
_SEAL: list = [None]  # the grader's child's seal (seal()): never lifted once made
_SCANNING: list = [None]  # the thread whose scan of the process's objects is the guard's own
_UNPICKLING: list = [None]  # the thread reading the grader's command (its probes by value)

_GC = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents"})
_PROCESSES = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "pty.spawn",
    }
)


def _the_seal(_pinned=None):
    """The seal :func:`protect` made and pinned here (a default it protects), else the one
    :func:`seal` made alone (tests), else None; sealed or not yet."""
    return _pinned if _pinned is not None else _SEAL[0]


def _sealed_window(_the_seal=_the_seal):
    """The seal in force (:func:`seal`: sealed), or None. The audit hook calls it through
    its own default: a function's ``__defaults__`` read there would call the hook again."""
    window = _the_seal()
    return window if window is not None and window._sealed else None


def _audit(event: str, args, _protected=frozenset(), _crib=None, _sealed=_sealed_window) -> None:
    if event == "builtins.id":  # every id(): the guard's own searches call it most
        return
    if (
        _protected
        and event in ("object.__setattr__", "object.__delattr__")
        and len(args) > 1
        and id(args[0]) in _protected
    ):  # the grading machinery's functions' code or defaults (protect())
        raise CribCall(
            _crib or Crib(f"{getattr(args[0], '__qualname__', args[0])}.{args[1]}", "tamper")
        )
    window = _ACTIVE[0]
    sealed = _sealed()
    if (
        sealed is not None
        and window is not sealed
        and (type(window) is not Window or window._seal is not sealed)
    ):  # sealed, the guard's state cleared or replaced: noted, and the seal judges
        sealed.note(Crib("the crib guard's state", "tamper"))
        window = sealed
    if window is None:
        return
    try:
        crib = window.refused(event, args)
    except Exception:  # noqa: BLE001 - made to fail (a sys.meta_path whose `in` raises):
        crib = Crib("the crib guard's state", "tamper")  # nothing goes through unjudged
    if crib is _UNREAD:  # linecache takes it for a file it cannot read: no lines
        raise PermissionError(errno.EACCES, "not read while a by-hand test runs", args[0])
    if crib is not None:
        if window is sealed:
            window.note(crib)  # CribCall notes it where _ACTIVE points, maybe elsewhere
        raise CribCall(crib)


#: What :meth:`Window.refused` gives for linecache opening a guarded file: a library
#: formatting a stack or a warning (``import torch`` inside a graded function calls
#: ``traceback.format_stack``) reaches the probe's spec file in the stack; that was taken
#: for the student reading it, and the import was left half done. The open fails (no
#: line of lablib's read), and nothing is noted.
_UNREAD = Crib("", "unread")
_LINECACHE_READ = linecache.updatecache.__code__


def _by_linecache(_getframe=sys._getframe) -> bool:
    """Whether the open being audited is linecache's (reading a file's lines for a stack,
    a warning or ``inspect.stack()``), a few frames up, and not for ``inspect.getsource``
    (the source read to be run: a crib named as such). ``sys._getframe`` is bound here (a
    submission set it to None so that this raised and the open went through)."""
    try:
        frame = _getframe(3)
    except ValueError:  # a thread with no Python frames (_thread.start_new_thread(C, ...))
        return False
    found = False
    for _ in range(12):
        if frame is None:
            break
        code = frame.f_code
        if code is _LINECACHE_READ:
            found = True
        elif found and code.co_name in ("getsource", "getsourcelines"):
            return False
        frame = frame.f_back
    return found


# --------------------------------------------------------------------- tampering

_MISSING = object()
_CALLED = (
    "builtins",
    "sys",
    "os",
    "os.path",
    "posixpath",
    "threading",
    "time",
    "types",
    "functools",
    "weakref",
    "dataclasses",
    "linecache",
    "dis",
    "importlib",
    "warnings",
    "struct",
    "pickle",
)


def _protected(modules) -> tuple[list, list]:
    """The functions (methods included) and classes defined by ``modules``."""
    functions, classes = [], []
    for module in modules:
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) != module.__name__:
                continue
            if isinstance(value, types.FunctionType):
                functions.append(value)
            elif isinstance(value, type):
                classes.append(value)
                functions += [m for m in _members(value) if isinstance(m, types.FunctionType)]
    return functions, classes


#: The names of the grader's child that its probes' window depends on (the rest of the
#: child is the forged-values question: ISOLATION.md).
_CHILD_NAMES = ("Window", "Crib", "crib_message", "protect", "verify", "run_probe")


def _snapshot(modules, child=None) -> tuple:
    """``(what, holder, key, value)`` for what the crib guard relies on: every name of
    ``modules`` (this one) and the child's :data:`_CHILD_NAMES`, every attribute of their
    classes, their functions' code and defaults, and the functions, classes and modules of
    the standard library (and builtins) their code names."""
    import importlib

    functions, classes = _protected(modules)
    functions = [
        f for f in functions if f is not verify and f is not _audit
    ]  # their defaults: protect()'s
    entries = [(f"{m.__name__}.{k}", vars(m), k, v) for m in modules for k, v in vars(m).items()]
    if child is not None:
        entries += [
            (f"{child.__name__}.{k}", vars(child), k, vars(child)[k])
            for k in _CHILD_NAMES
            if k in vars(child)
        ]
        run_probe = vars(child).get("run_probe")
        if isinstance(run_probe, types.FunctionType):
            functions.append(run_probe)
    entries += [
        (f"{c.__module__}.{c.__qualname__}.{k}", c, k, v)
        for c in classes
        for k, v in vars(c).items()
    ]
    used: set = set()
    for function in functions:
        used |= _names_used(function.__code__)
        for attr in ("__code__", "__defaults__", "__kwdefaults__"):
            entries.append(
                (
                    f"{function.__module__}.{function.__qualname__}.{attr}",
                    function,
                    attr,
                    getattr(function, attr),
                )
            )
    for name in _CALLED:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        namespace = vars(module)
        for key in sorted(used & namespace.keys()):
            value = namespace[key]
            if (
                callable(value)
                or isinstance(value, types.ModuleType)
                or (module is sys and key == "modules")
            ):
                entries.append((f"{name}.{key}", namespace, key, value))
    return tuple(entries)


def _seal_changed() -> str | None:
    """What of the seal's state differs from what :func:`seal` left (:func:`verify`'s last
    check): another seal put in its place, or, sealed, another window active between
    probes."""
    pinned = _the_seal.__defaults__[0]
    if pinned is None:
        return None
    if not pinned._sealed:
        return None if _SEAL[0] is None else "the crib guard's seal"
    if _SEAL[0] is not pinned or _ACTIVE[0] is not pinned:
        return "the crib guard's seal"
    return None


def verify(_snapshot=(), _dict=dict, _type=type, _vars=vars, _getattr=getattr, _missing=_MISSING):
    """The first thing of the grading machinery that differs from when :func:`protect`
    ran (a name rebound in its modules, a class attribute, a function's code or defaults,
    a standard-library function it calls), or None (also when :func:`protect` never ran:
    ``lablib.check`` in a notebook). What it uses is bound when it is defined, and
    :func:`protect` forbids changing its defaults."""
    for what, holder, key, value in _snapshot:
        if _type(holder) is _dict:
            current = holder.get(key, _missing)
        elif isinstance(holder, _type):
            current = _vars(holder).get(key, _missing)
        else:
            current = _getattr(holder, key, _missing)
        if current is not value:
            return what
    return _seal_changed() if _snapshot else None


def protect(child: str | None = "lablib.grading.run.child") -> None:
    """Called by the grader's child before any student code runs (once). From then on the
    audit hook refuses changing the code or defaults of the guard's functions and of the
    child's (``child``; the hook and :func:`verify` included), and :func:`verify` compares
    what the guard relies on with this moment's (its names and the child's that run a
    probe, its classes' attributes, which Python does not audit, the standard library it
    calls), so that a submission
    which rebinds the guard's names (``guard.Window = ...``, ``Window.__enter__ = ...``,
    ``types.FunctionType = ...``) fails its by-hand tests instead of turning the guard
    off. (Code written against the guard's state while a probe runs, or ``ctypes``, is
    beyond what an in-process guard can stop.)"""
    import importlib

    if verify.__defaults__[0]:
        return  # protected already
    modules = [sys.modules[__name__]]
    child_module = importlib.import_module(child) if child else None
    if child_module is not None:  # the grader's child: a process left running is a crib
        _processes_started.__defaults__ = (True,)
        _running_lablib_code.__defaults__ = (True,)
        _subreaper()  # orphans of a double fork become this process's children, seen so
        _the_seal.__defaults__ = (Window(BY_HAND, {}, None, None),)  # the only seal (verify())
        import pickle

        read_command.__defaults__ = (
            pickle.loads,
            child_module.child_main.__code__,
            _cloudpickle_codes(),
            sys._getframe,
        )
    snapshot = _snapshot(modules, child_module)
    verify.__defaults__ = (snapshot, *verify.__defaults__[1:])
    functions, classes = _protected(modules + ([child_module] if child_module else []))
    protected = frozenset(id(o) for o in (*functions, *classes, _audit, verify))
    _audit.__defaults__ = (protected, None, _sealed_window)
    if not _HOOKED[0]:
        sys.addaudithook(_audit)
        _HOOKED[0] = True


def seal(namespace) -> None:
    """Called by the grader's child once, after the graded cells and the probes of pieces
    not written by hand, before the first by-hand probe is read: from then on lablib's
    guarded code and the ready-made implementations stay disarmed, and the audit hook
    refuses what would fetch them again, until the process ends.

    A :class:`Window` alone covers its probe's call. Before and after it (reading the
    command, the value encoded and sent) the probe's inputs, hidden tests' included, and
    its reply are reachable from the stack, and code the submission left behind runs
    there too: a profile hook, a signal handler, a ``gc`` callback, a thread, a function
    of TensorFlow's replaced. With lablib's code put back after each window, such code ran
    the probe again on lablib's reference and rewrote the reply (a blank Lab 1, 16 of 24
    points with hidden tests). Sealed, each by-hand probe's window opens over the seal:
    its own functions are lifted for it and disarmed again when it ends, and nothing else
    is ever put back. A crib noted between windows fails every later by-hand probe.
    ``namespace``: the cells' names (searched for lablib's code to disarm). The seal is
    the one :func:`protect` made (:func:`_the_seal`, a default it protects: a submission
    that put a seal of its own in ``_SEAL`` got windows that put everything back, 8 of 8
    points with a hidden test); :func:`verify` checks that the seal in force is that one."""
    window = _the_seal() or Window(BY_HAND, {}, None, None)
    if window._sealed:
        return
    window.namespace = namespace
    window._forgets = True
    window.catalogue = cat = catalogue(window.guard)
    cat.preload()
    window._ready = _ready_made()
    window._ready_codes = _ready_code_names(window._ready.values())
    search = _Search(cat, window._ready, set(), ready_codes=window._ready_codes)
    search.run([namespace, sys.modules["builtins"].__dict__], flag=False)
    found = _running_beside(cat)
    if not _LOCK.acquire(blocking=False):
        raise RuntimeError("a crib guard window is open: the seal comes between probes")
    try:
        window._arm(search)
    finally:
        _LOCK.release()
    if found is not None:
        window.note(found)
    window._sealed = True
    _SEAL[0] = window


def read_command(data, _loads=None, _reader=None, _makers=frozenset(), _getframe=sys._getframe):
    """The grader's command as the child reads it (``pickle.loads``). Its probes travel by
    value: code objects and functions are made as it is read, which the seal lets through
    only where the unpickler makes them, called from the child's own loop (``_reader``,
    its code, bound by :func:`protect`): made by this frame (the unpickler's C code) or by
    one of cloudpickle's functions it calls directly (``_makers``, their code). Code run
    by a ``gc`` callback, a signal or a profile hook while the command is read made a
    function of lablib's reference so (a red team: 8 of 8 with a hidden test); its frame is
    neither."""
    import pickle

    loads = _loads or pickle.loads
    try:
        # by value: the child runs as ``__main__``, a second copy of its module's code
        trusted = _reader is None or _getframe(1).f_code == _reader
    except ValueError:
        trusted = False
    if not trusted:
        return loads(data)
    _UNPICKLING[0] = (threading.get_ident(), _getframe(0), _makers)
    try:
        return loads(data)
    finally:
        _UNPICKLING[0] = None


def _made_by_unpickler(_getframe=sys._getframe) -> bool:
    """Whether the code object or function being made (an audit event) is made by
    :func:`read_command`'s unpickler: on its thread, by its frame or a cloudpickle function
    that frame's unpickler called (the audit hooks' own frames skipped)."""
    reading = _UNPICKLING[0]
    if reading is None or reading[0] != threading.get_ident():
        return False
    hooks = (Window.refused.__code__, _audit.__code__)
    try:
        frame = _getframe(1)
    except ValueError:
        return False
    while frame is not None and frame.f_code in hooks:
        frame = frame.f_back
    if frame is None:
        return False
    if frame is reading[1]:
        return True
    return frame.f_code in reading[2] and frame.f_back is reading[1]


def _cloudpickle_codes() -> frozenset:
    """The code of cloudpickle's functions as imported now (before any student code): the
    ones its unpickling calls to make a probe's functions (:func:`read_command`)."""
    found = set()
    for name, module in list(sys.modules.items()):
        if name == "cloudpickle" or name.startswith("cloudpickle."):
            for value in list(vars(module).values()):
                if isinstance(value, types.FunctionType):
                    found.add(value.__code__)
    return frozenset(found)


class _ImportGate:
    """The window's first ``sys.meta_path`` finder: a guarded lablib module or a ready-made
    one (:data:`READY_MADE`) imported while the window is open (``lablib.layers`` imports
    its submodules on first use) loads as usual and is disarmed before the importer sees
    it. Every other module is left to the other finders."""

    def __init__(self, window: Window):
        self.window = window

    def find_spec(self, name, path=None, target=None):
        window = self.window
        guarded = window.catalogue.guarded_module(name)
        if not guarded and name not in window._ready_modules:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if type(finder) is _ImportGate or find is None:  # a window's over the seal's:
                continue  # each asked the other, without end (an import in a by-hand test)
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _GateLoader(spec.loader, window, guarded)
        return spec

    def invalidate_caches(self):
        pass


class _GateLoader:
    """Loads one module for :class:`_ImportGate`, then disarms it. A guarded module's
    files are read by the loader itself (the window lets that one read through, on this
    thread) and the code object it gets is the only lablib code the window lets run."""

    def __init__(self, inner, window: Window, guarded: bool):
        self.inner = inner
        self.window = window
        self.guarded = guarded

    def create_module(self, spec):
        create = getattr(self.inner, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        window = self.window
        if self.guarded and hasattr(self.inner, "get_code"):
            window._reading = threading.get_ident()
            try:
                code = self.inner.get_code(module.__name__)
            finally:
                window._reading = None
            # only lablib's own module code runs unjudged; a loader of the submission's that
            # answers for a guarded name with other code (a copy of a reference compiled
            # elsewhere) has it judged like any exec (a red team: 13 of 24 so)
            own = (
                isinstance(code, types.CodeType)
                and code.co_name == "<module>"
                and window.catalogue.name_of(code) is not None
            )
            window._running = code if own else None
            try:
                exec(code, module.__dict__)
            finally:
                window._running = None
        else:
            self.inner.exec_module(module)
        module.__loader__ = self.inner
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.inner
        window._disarm_module(module)

    def __getattr__(self, name):  # is_package, get_resource_reader, ...: the real loader's
        return getattr(self.inner, name)


class Window:
    """``with Window(guard, objects, probe, namespace) as window: ...``: the probe of a
    by-hand piece runs inside; afterwards ``window.found`` is the :class:`Crib` found (or
    None). When the graded objects already hold lablib's code, ``found`` is set on entry
    and the caller does not run the probe.

    Args:
        guard: the guarded parts (:data:`BY_HAND`; empty: no guard, nothing happens).
        objects: the graded names' objects (name -> object).
        probe: the probe (its own functions stay callable).
        namespace: everything the student's cells defined (searched for lablib's code
            to disarm, not for cribs).

    ``window.seconds`` says what the guard cost: ``search`` (the graded objects and the
    namespace), ``arm`` (disarming), ``threads`` and ``restore``.
    """

    def __init__(self, guard, objects=None, probe=None, namespace=None):
        self.guard = tuple(guard or ())
        self.objects = dict(objects or {})
        self.probe = probe
        self.namespace = namespace if namespace is not None else {}
        self.found: Crib | None = None
        self.seconds: dict[str, float] = {}
        self._saved: list = []
        self._builtins: list = []  # (module, attribute, builtin or None, gate) swapped
        self._kernels: list = []  # [(library, [(operator, key, its line)])]: _gate_kernels
        self._lines: dict = {}
        self._threads: set = set()
        self._ready: dict = {}
        self._ready_codes: dict = {}  # _ready_code_names: the ready-made code, by key
        self._ready_modules: dict = {}
        self._exempt: set = set()
        self._gate = _ImportGate(self)
        self._reading = None  # the thread whose guarded import reads lablib's files
        self._running = None  # the code object of a guarded module being imported
        self._arming = None  # the thread disarming a module imported in the window
        self._open = False
        self._seal: Window | None = None  # the seal this window opens over (seal())
        self._sealed = False  # this window is the seal (seal())
        self._forgets = False  # the seal being made: keeps nothing it never gives back
        self._lifted: list = []  # (function, Crib): the probe's own, lifted from the seal

    # -- what the audit hook refuses
    def note(self, crib: Crib) -> None:
        if self.found is None:
            self.found = crib

    def refused(self, event: str, args) -> Crib | None:
        cat = self.catalogue
        if event in ("open", "compile", "import", "exec") and not _first_finder(self._gate):
            return Crib("sys.meta_path (removing the guard from the import system)", "refused")
        if event == "open":
            if self._reading != threading.get_ident() and cat.guarded_path(args[0]):
                if _by_linecache():
                    return _UNREAD
                return Crib(os.fsdecode(os.fspath(args[0])), "file")
            return None
        if event == "compile":
            if (
                self._reading != threading.get_ident()
                and len(args) > 1
                and cat.guarded_path(args[1])
            ):
                return Crib(os.fsdecode(os.fspath(args[1])), "compiled")
            return None
        if event in ("code.__new__", "function.__new__") and _made_by_unpickler():
            return None  # the grader's command, its probes by value (sealed: read_command())
        if event in ("exec", "function.__new__"):
            code = args[0] if args else None
            if isinstance(code, types.CodeType) and code is not self._running:
                name = cat.lablib_code(code)
                if name is not None:
                    return Crib(name, _kind(name) if cat.name_of(code) else "copy")
                ready = _ready_name(self._ready_codes, code)
                if ready is not None:  # a ready-made function's code, made into a function
                    return Crib(ready, "ready-made")
            return None
        if event == "object.__setattr__":  # a disarmed function given its code back
            if (
                len(args) > 2
                and args[1] == "__code__"
                and self._arming != threading.get_ident()
                and (
                    any(args[0] is function for function, _ in self._saved)
                    or isinstance(args[2], types.CodeType)
                    and (
                        cat.lablib_code(args[2]) is not None
                        or _ready_name(self._ready_codes, args[2]) is not None
                    )
                )
            ):
                return Crib("a function's __code__ (replacing the code of a function)", "refused")
            return None
        if event in _GC:
            if _SCANNING[0] == threading.get_ident():  # the guard's own scan, sealed
                return None
            return Crib(f"{event} (a search of the interpreter's objects)", "refused")
        if event == "code.__new__":  # lablib's bytecode under other names (code.replace)
            if args and isinstance(args[0], bytes) and args[0] in cat.bytecodes:
                return Crib("a new code object made from lablib's own bytecode", "refused")
            return None
        if event in _PROCESSES:
            return Crib(f"{event} (a new process)", "refused")
        return None

    # -- entering and leaving
    def __enter__(self):
        if not self.guard:
            return self
        started = time.perf_counter()
        self._seal = _sealed_window()
        if self._seal is not None:  # the grader's child, sealed: what it noted or broke
            self._seal.note_tampering()
            if self._seal.found is not None:
                self.found = self._seal.found
                self.seconds["search"] = time.perf_counter() - started
                return self
        self.catalogue = catalogue(self.guard)
        self.catalogue.preload()
        self._ready = _ready_made()
        # sealed, the seal's table (its rows were read before it disarmed them); else read now
        self._ready_codes = (
            self._seal._ready_codes
            if self._seal is not None
            else _ready_code_names(self._ready.values())
        )
        reached: list = []
        self._exempt = (
            probe_functions(self.probe, self.catalogue, reached)
            if self.probe is not None
            else set()
        )
        search = _Search(
            self.catalogue, self._ready, self._exempt, reached, ready_codes=self._ready_codes
        )
        search.run(self.objects.values(), flag=True)
        found = search.first or _running_beside(self.catalogue)
        if found is not None:
            self.found = found
            self.seconds["search"] = time.perf_counter() - started
            return self
        # Where the student's code lives (the cells' names, the graded functions' module
        # globals, builtins): lablib's code kept there is disarmed too (not a crib by
        # itself: other pieces may use lablib's layers).
        roots = [self.namespace, sys.modules["builtins"].__dict__]
        for obj in self.objects.values():
            for function in (
                [obj]
                if isinstance(obj, types.FunctionType)
                else _members(obj)
                if isinstance(obj, type)
                else []
            ):
                if isinstance(function, types.FunctionType):
                    roots.append(function.__globals__)
        search.run(roots, flag=False)
        self.seconds["search"] = time.perf_counter() - started
        if not _LOCK.acquire(blocking=False):
            raise RuntimeError(
                "a crib guard window is already open in this process; probes of "
                "by-hand pieces run one at a time"
            )
        started = time.perf_counter()
        try:
            if self._seal is not None:
                self._lift(reached)
            self._arm(search)
        except BaseException:
            self._leave()
            _LOCK.release()
            raise
        self.seconds["arm"] = time.perf_counter() - started
        return self

    def _lift(self, reached) -> None:
        """Sealed: the probe's own functions the seal disarmed get their code back for
        this probe (:meth:`_hand_over` disarms them again)."""
        seal = self._seal
        for function in reached:
            gated = _GATED.get(id(function.__code__))
            if gated is None or gated[0] is not function.__code__ or gated[1] is None:
                continue
            seal._arming = threading.get_ident()
            try:
                function.__code__ = gated[1]
            finally:
                seal._arming = None
            self._lifted.append((function, gated[2]))

    def _leave(self) -> None:
        """What the window disarmed put back (:meth:`_restore`), or, sealed, handed to the
        seal (:meth:`_hand_over`)."""
        if self._seal is None:
            self._restore()
        else:
            self._hand_over()

    def _hand_over(self) -> None:
        """Sealed: nothing is put back. The probe's lifted functions are disarmed again and
        what this window disarmed (modules imported while it ran, copies found) stays so,
        kept by the seal; only this window's finder leaves ``sys.meta_path``."""
        seal = self._seal
        self._arming = seal._arming = threading.get_ident()
        try:
            while self._lifted:
                function, crib = self._lifted.pop()
                _disarm(function, crib, seal._saved)
        finally:
            self._arming = seal._arming = None
        seal._saved.extend(self._saved)
        seal._builtins.extend(self._builtins)
        seal._kernels.extend(self._kernels)  # sealed: torch's kernels stay gated
        seal._lines.update(self._lines)
        self._saved, self._builtins, self._kernels, self._lines = [], [], [], {}
        try:
            sys.meta_path[:] = [f for f in list.__iter__(sys.meta_path) if f is not self._gate]
        except BaseException:  # noqa: BLE001 - the seal's own finder stays: nothing else to do
            pass

    def _targets(self, functions, classes) -> dict:
        """id -> (function, the Crib its call is) for lablib's functions (or copies) and
        the lablib classes' methods among ``functions`` and ``classes``."""
        cat = self.catalogue
        targets: dict = {}
        for function in functions:
            if not _gateable(function.__code__):
                continue  # a generator expression's function (".0"): found as a frame instead
            name = cat.name_of(function.__code__)
            copied = None if name is not None else cat.copied(function.__code__)
            if name is not None or copied is not None:
                crib = Crib(name, _kind(name)) if name is not None else Crib(copied, "copy")
                targets.setdefault(id(function), (function, crib))
            elif (ready := _ready_name(self._ready_codes, function.__code__)) is not None:
                targets.setdefault(id(function), (function, Crib(ready, "ready-made")))
        for klass in classes:
            for member in _members(klass):
                if isinstance(member, types.FunctionType):
                    name = cat.name_of(member.__code__)
                    if name is not None:
                        targets.setdefault(id(member), (member, Crib(name, _kind(name))))
        return targets

    def _module_targets(self, modules) -> tuple[list, list]:
        functions, classes = [], []
        for module in modules:
            for value in list(vars(module).values()):
                if isinstance(value, types.FunctionType):
                    functions.append(value)
                elif isinstance(value, type):
                    classes.append(value)
        return functions, classes

    def _ready_targets(self, ready) -> dict:
        targets: dict = {}
        for name, obj in ready:
            for member in _members(obj) if isinstance(obj, type) else [obj]:
                if isinstance(member, types.FunctionType):
                    targets.setdefault(id(member), (member, Crib(name, "ready-made")))
        return targets

    def _keeps(self, crib: Crib) -> bool:
        """Whether the original of what is disarmed for ``crib`` is kept: always where it
        is put back (a window of ``lablib.check``); sealed, lablib's own only (a probe's
        own functions get theirs back for it, and the audit hook knows lablib's code)."""
        return not (self._forgets or self._seal is not None) or crib.kind != "ready-made"

    def _apply(self, targets: dict) -> None:
        # the window's own __code__ swaps (imports in the window); sealed, the seal judges
        # them until the window is the active one
        arming = [self] if self._seal is None else [self, self._seal]
        for window in arming:
            window._arming = threading.get_ident()
        try:
            for key, (function, crib) in targets.items():
                if key not in self._exempt:
                    _disarm(function, crib, self._saved, self._keeps(crib))
        finally:
            for window in arming:
                window._arming = None

    def _disarm_module(self, module) -> None:
        """A module imported while the window is open: disarmed like those loaded before,
        by what it holds (lablib's code or copies: a module loaded through the gate under
        a guarded name from no file of lablib's is judged by its functions, not its
        ``__file__``)."""
        ready = []
        for name, module_name, attribute in READY_MADE:
            if module_name == module.__name__:
                obj = vars(module).get(attribute)
                while obj is not None:
                    ready.append((name, obj))
                    obj = (
                        getattr(obj, "__wrapped__", None)
                        if isinstance(obj, types.FunctionType)
                        else None
                    )
        _ready_code_names(ready, self._ready_codes)  # read before they are disarmed
        self._apply(self._targets(*self._module_targets([module])))
        self._apply(self._ready_targets(ready))
        self._swap_builtins()  # all rows: torch's first import in a window registers
        # torch._C._nn from C, never through the import gate

    def _swap_builtins(self, module_name: str | None = None) -> None:
        """Each ready-made builtin of :data:`READY_MADE` (torch's attention: no Python code
        to swap) replaced in its module by a gate while the window is open, so that a
        lookup at call time (``getattr(F, name)``, an import in the function) reaches the
        gate; a builtin the graded objects hold is the search's to find. ``module_name``:
        that module's rows only (a module imported in the window). torch's attention
        kernels are gated in its dispatcher too, once per window (:func:`_gate_kernels`),
        which reaches a builtin held anywhere."""
        places = [
            (name, sys.modules.get(row_module), attribute)
            for name, row_module, attribute in READY_MADE
            if module_name is None or row_module == module_name
        ]
        places += [(f"torch.ops.aten.{op}", namespace, op) for namespace, op in _aten_ops()]
        for name, module, attribute in places:
            obj = getattr(module, "__dict__", {}).get(attribute) if module is not None else None
            if isinstance(obj, types.BuiltinFunctionType) or _is_aten(module, obj):
                crib = Crib(name, "ready-made")
                gate = _builtin_gate(crib)
                try:
                    setattr(module, attribute, gate)
                except (AttributeError, TypeError):  # a module that refuses: the search's
                    continue
                # sealed, the builtin is never put back: not kept (read from the seal's
                # list, it ran as it is)
                self._builtins.append((module, attribute, obj if self._keeps(crib) else None, gate))
        if not self._kernels and not (self._seal is not None and self._seal._kernels):
            gated = _gate_kernels()
            if gated is not None:
                self._kernels.append(gated)

    def _arm(self, search: _Search) -> None:
        cat = self.catalogue
        functions, classes = self._module_targets([*search.modules, *cat.loaded_modules()])
        targets = self._targets(
            # the grader's child: every function object on lablib's or ready-made code
            [
                *search.functions,
                *functions,
                *_running_lablib_code(cat, ready_codes=self._ready_codes),
            ],
            [*search.classes, *classes],
        )
        targets.update(self._ready_targets(self._ready.values()))
        self._ready_modules = {
            module: name for name, module, _ in READY_MADE if module not in sys.modules
        }
        if "torch.library" not in sys.modules:  # torch imported in the window: its kernels
            self._ready_modules["torch.library"] = "torch.library"  # are gated then
        self._apply(targets)
        self._swap_builtins()
        import linecache

        for file in list(linecache.cache):
            if isinstance(file, str) and cat.known_path(file):
                lines = linecache.cache.pop(file)
                if not (self._forgets or self._seal is not None):  # sealed: never put back
                    self._lines[file] = lines
        if not _HOOKED[0]:
            sys.addaudithook(_audit)
            _HOOKED[0] = True
        sys.meta_path.insert(0, self._gate)
        self._threads = set(sys._current_frames())
        _ACTIVE[0] = self
        self._open = True

    def __exit__(self, *exc):
        if not self._open:
            return False
        started = time.perf_counter()
        try:
            self._wait_for_threads()
            self._still_armed()
        finally:
            if self._seal is None:
                _ACTIVE[0] = None
            self._open = False
            self.seconds["threads"] = time.perf_counter() - started
            started = time.perf_counter()
            try:
                self._leave()
            finally:
                _ACTIVE[0] = self._seal  # sealed: the seal judges again, never nobody
                self.seconds["restore"] = time.perf_counter() - started
                _LOCK.release()
        return False

    def _still_armed(self) -> None:
        """The window's own state as it left it: still the open window, its finder first in
        line, every disarmed function still disarmed. Code under test that switched the
        guard off in between and on again is beyond this check."""
        changed = self._tampered()
        if changed is not None:
            self.note(changed)

    def note_tampering(self) -> None:
        """The seal's check before each probe (:meth:`_still_armed` for the seal)."""
        if self.found is None:
            self._still_armed()

    def _tampered(self) -> Crib | None:
        if _ACTIVE[0] is not self:
            return Crib("the crib guard's state", "tamper")
        if not _first_finder(self._gate):
            return Crib("sys.meta_path", "tamper")
        for function, _ in self._saved:
            if function.__code__ is not _GATES.get(function):
                return Crib(f"{function.__qualname__}.__code__", "tamper")
        for module, attribute, _, gate in self._builtins:
            if getattr(module, "__dict__", {}).get(attribute) is not gate:  # put back, replaced
                return Crib(f"{getattr(module, '__name__', '?')}.{attribute}", "tamper")
        for _, registered in self._kernels:
            changed = _kernel_changed(registered)
            if changed is not None:  # torch's kernel given back (the library destroyed)
                return Crib(f"torch.ops.aten.{changed} (its kernel)", "tamper")
        return None

    def _wait_for_threads(self) -> None:
        deadline = time.monotonic() + THREAD_WAIT
        while True:
            new = set(sys._current_frames()) - self._threads
            if not new or time.monotonic() >= deadline:
                break
            for thread in threading.enumerate():
                if thread.ident in new and thread is not threading.current_thread():
                    thread.join(max(0.0, deadline - time.monotonic()))
            time.sleep(0.005)
        if new:
            for thread in threading.enumerate():
                if thread.ident in new:
                    _LEFT_RUNNING.add(thread)
            self.note(Crib("a thread your code started", "thread"))

    def _restore(self) -> None:
        try:  # a finders' list whose own methods raise cannot keep the rest from being put back
            sys.meta_path[:] = [f for f in list.__iter__(sys.meta_path) if f is not self._gate]
        except BaseException:  # noqa: BLE001 - nothing else to do
            pass
        while self._kernels:  # torch's own kernels back (the registrations removed)
            library, _ = self._kernels[-1]
            try:
                library._destroy()
            except BaseException:  # noqa: BLE001 - nothing else to do
                pass
            self._kernels.pop()
        while self._builtins:  # each put back before it is forgotten (an interrupt in
            module, attribute, builtin, _ = self._builtins[-1]  # between left the gate there)
            try:
                setattr(module, attribute, builtin)
            except BaseException:  # noqa: BLE001 - nothing else to do
                pass
            self._builtins.pop()
        while self._saved:
            function, code = self._saved[-1]
            try:
                function.__code__ = code
            except BaseException:  # noqa: BLE001 - a student's audit hook: nothing else to do
                pass
            self._saved.pop()
        import linecache

        linecache.cache.update(self._lines)
        self._lines = {}


def _running_beside(cat: Catalogue) -> Crib | None:
    """What of the submission runs beside a window about to open, as a crib (None where
    nothing does): a thread an earlier test left running, a process the submission
    started (:func:`_processes_started`), another thread running lablib's code
    (:func:`_frames_running_lablib`)."""
    if any(t.is_alive() for t in _LEFT_RUNNING):
        return Crib("a thread your code started in an earlier test", "thread")
    forked = _processes_started()
    if forked:  # a process forked before any window keeps lablib's code armed
        return Crib(forked, "process")
    running = _frames_running_lablib(cat)
    return Crib(running, "frame") if running else None


#: torch's attention kernels as operators (``torch.ops.aten.<name>``), each reaching the
#: same computation as ``scaled_dot_product_attention`` (a red team: 5/5 through
#: ``getattr(torch.ops.aten, ...)``): replaced while a by-hand window is open.
_ATEN_ATTENTION = (
    "scaled_dot_product_attention",
    "_scaled_dot_product_attention_math",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_native_multi_head_attention",
    "_transformer_encoder_layer_fwd",
)


def _aten_ops() -> list:
    """``(torch.ops.aten, name)`` of :data:`_ATEN_ATTENTION`, where torch is loaded."""
    torch = sys.modules.get("torch")
    try:
        namespace = torch.ops.aten if torch is not None else None
    except Exception:  # noqa: BLE001 - a torch half imported or without ops
        return []
    if namespace is None:
        return []
    out = []
    for op in _ATEN_ATTENTION:
        try:
            getattr(namespace, op)  # loaded into its __dict__ (torch makes them lazily)
        except Exception:  # noqa: BLE001 - not in this torch
            continue
        out.append((namespace, op))
    return out


def _is_aten(namespace, obj) -> bool:
    """Whether ``obj`` is an operator of torch's ``aten`` namespace (not yet replaced)."""
    return (
        obj is not None
        and type(obj).__name__ == "OpOverloadPacket"
        and (type(namespace).__name__ == "_OpNamespace")
    )


#: Every kernel computing attention in torch, as the operators of its dispatcher
#: (``aten::<name>``): :data:`_ATEN_ATTENTION` and the GPU kernels they choose between.
_ATEN_KERNELS = _ATEN_ATTENTION + (
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_attention_math_for_mps",
    "_efficient_attention_forward",
    "_flash_attention_forward",
)
#: The dispatch keys whose kernels compute (not ``Meta``: shapes only; not ``Autograd``,
#: which calls on to these).
_KERNEL_KEYS = (
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
    "CompositeImplicitAutogradNestedTensor",
    "CPU",
    "CUDA",
    "MPS",
    "XPU",
    "NestedTensorCPU",
    "NestedTensorCUDA",
)


def _kernel_line(operator: str, key: str) -> str | None:
    """The line of ``key``'s kernel in force among the dispatcher's registrations for
    ``aten::<operator>`` (where it was registered: an alias key's, such as
    ``CompositeImplicitAutograd``, included)."""
    import torch

    dump = torch._C._dispatch_dump(f"aten::{operator}")
    heads = (f"{key}: ", f"{key}[alias]: ")
    return next((line for line in dump.splitlines() if line.startswith(heads)), None)


def _gate_kernels():
    """torch's attention kernels replaced in its dispatcher by gates (each a ready-made
    crib named ``torch.ops.aten.<operator>``), where torch is loaded: every way to reach
    them runs a gate, the operator registry asked by name
    (``torch._C._jit_get_operation``), a cache filled in a cell
    (``torch.overrides.get_overridable_functions()``) and a builtin kept before any window
    included. ``(library, [(operator, key, registration line)])``, or None where torch is not
    (yet) loaded or has no such dispatcher; the library's ``_destroy`` gives torch's
    kernels back."""
    torch, library = sys.modules.get("torch"), sys.modules.get("torch.library")
    if torch is None or getattr(library, "Library", None) is None:
        return None
    import warnings

    registered: list = []
    gates = None
    try:
        has = torch._C._dispatch_has_kernel_for_dispatch_key
        gates = library.Library("aten", "IMPL")
        with warnings.catch_warnings():  # torch warns once that a kernel is overridden
            warnings.simplefilter("ignore")
            for operator in _ATEN_KERNELS:
                crib = Crib(f"torch.ops.aten.{operator}", "ready-made")
                for key in _KERNEL_KEYS:
                    try:
                        if not has(f"aten::{operator}", key):
                            continue
                    except RuntimeError:  # no such operator or key in this torch
                        continue
                    gates.impl(operator, _builtin_gate(crib), key)
                    registered.append((operator, key, _kernel_line(operator, key)))
    except Exception:  # noqa: BLE001 - a torch half imported or without a dispatcher: the
        if gates is not None:  # module-level gates (_swap_builtins) and the search hold
            try:
                gates._destroy()  # none left half made
            except Exception:  # noqa: BLE001 - nothing else to do
                pass
        return None
    return gates, registered


def _kernel_changed(registered) -> str | None:
    """The operator of ``registered`` (:func:`_gate_kernels`) whose gate is no longer the
    kernel its dispatcher runs, or None."""
    for operator, key, line in registered:
        try:
            if _kernel_line(operator, key) != line:
                return operator
        except Exception:  # noqa: BLE001 - the table unreadable: judged changed
            return operator
    return None


def _first_finder(gate) -> bool:
    """Whether ``gate`` is in ``sys.meta_path``, judged without the list's own methods (a
    list subclass whose ``in`` raised switched every check of the window off)."""
    finders = sys.meta_path
    return type(finders) is list and any(f is gate for f in list.__iter__(finders))


def _builtin_gate(crib: Crib):
    """What takes a ready-made builtin's place in its module while a window is open."""

    def ready_made(*args, **kwargs):
        raise CribCall(crib)

    return ready_made


def _gateable(code) -> bool:
    """Whether a gate can take the place of ``code`` (:func:`_gate_code` writes its
    parameters out): not a comprehension's or generator expression's code, whose hidden
    parameter ``.0`` is no name."""
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    return all(name.isidentifier() for name in code.co_varnames[:count])


def _subreaper() -> None:
    """Make this process the reaper of its descendants' orphans (Linux's
    ``PR_SET_CHILD_SUBREAPER``): a process double-forked by the submission (its parent
    exited) stays this process's child, where :func:`_processes_started` looks. Without
    the sandbox it was reparented elsewhere and served lablib's code unseen."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _frames_running_lablib(cat: Catalogue) -> str:
    """ "" or what another thread is running of lablib's code (a frame of it, or of code
    holding it, anywhere in the thread's stack): a frame that began before the window
    runs the code it began with, whatever the window swaps (a red team's threads waited
    inside the reference for the probe's inputs: 19/19)."""
    me = threading.get_ident()
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        while frame is not None:
            name = cat.lablib_code(frame.f_code)
            if name is not None:
                return name
            frame = frame.f_back
    return ""


def _processes_started(_grading: bool = False) -> str:
    """ "" or, where this process has children still running (not zombies), what they are:
    "a process your code started (pid 12, python3)". A child forked before any window
    holds lablib's code as it was, armed, and can serve it over a pipe to a probe (a red
    team scored 19/19 on Lab 1 so). Read from ``/proc`` (Linux; elsewhere ""). Only in
    the grader's child (``_grading``, set by :func:`protect`, which then refuses changing
    it): in a notebook, ``lablib.check`` beside a process the student started for their
    own reasons (TensorBoard) judges nothing that counts."""
    if not _grading:
        return ""
    try:  # this process's pid as the /proc mounted here numbers it (a chroot's /proc may be
        me = os.readlink("/proc/self")  # another PID namespace's: os.getpid() is then 1)
    except OSError:
        return ""
    for _ in range(4):  # listed again while only exited children were seen: a process that
        exited = False  # re-forks every few ms had a child not yet listed (the chroot's
        try:  # long /proc of the host's processes missed it: 3 points, a CI rehearsal)
            entries = [e for e in os.listdir("/proc") if e.isdigit() and e != me]
            entries.sort(key=int, reverse=True)  # the newest first: a re-forker's latest
        except OSError:
            return ""
        for pid in entries:
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    stat = f.read().decode("ascii", "replace")
            except OSError:
                continue
            name, _, rest = stat.rpartition(")")
            fields = rest.split()
            if len(fields) > 1 and fields[1] == me:
                if fields[0] in ("Z", "X"):
                    exited = True
                    continue
                comm = "".join(c if c.isprintable() else "?" for c in name.partition("(")[2][:40])
                return f"a process your code started (pid {pid}, {comm})"  # its name is the
                # submission's to choose (prctl): a line break in it started lines of its own
        if not exited:
            return ""
    return ""


def _running_lablib_code(cat: Catalogue, _grading: bool = False, *, ready_codes=None) -> list:
    """Every function object of the process whose code is lablib's guarded code or a copy
    of it, wherever it is kept: a second function made on a guarded function's code
    (``type(f)(f.__code__, f.__globals__)``, or on ``code.replace(...)`` of it) and kept
    where the search does not look (a ``deque``, a ``queue.Queue``, a thread's frame)
    called lablib's function, the original disarmed, and scored a hidden test. Each code
    object is judged once per process by :meth:`Catalogue.lablib_code`, then named as
    :meth:`Window._targets` names them; the probe's own stay exempt. Run by the grader's
    code before the window opens (the audit hook refuses a search of the interpreter's
    objects only while it is open).

    Only in the grader's child (``_grading``, set by :func:`protect`): the scan reads
    every object of the process (0.1 to 0.3 s a window in a TensorFlow process of 600,000
    objects: it doubled the time of ``lablib.check`` on Lab 4), what it finds only
    deliberate concealment makes, and ``lablib.check`` in a notebook decides no grade.
    (The interpreter's own loops, ``filter`` and ``map`` over the objects, measured no
    faster than this loop.) ``ready_codes`` (:func:`_ready_code_names`): a function made
    on a ready-made function's code is found too, the ready-made originals disarmed or not.
    The cache holds no code object (a weak reference): read from it, Keras's attention's
    original was made into a working function."""
    if not _grading:
        return []
    import gc

    function, seen, ready = types.FunctionType, _CODE_SEEN, ready_codes or {}
    size, ref = len(ready), weakref.ref
    gc.unfreeze()  # gc.get_objects() leaves out what gc.freeze() put aside (no audit event)
    found = []
    _SCANNING[0] = threading.get_ident()  # sealed, the seal lets this one search through
    try:
        objects = gc.get_objects()
    finally:
        _SCANNING[0] = None
    gated = _GATED  # a gate in place already (sealed): disarmed, nothing to add
    for obj in objects:
        if type(obj) is function:
            code = obj.__code__
            key = id(code)
            if key in gated:  # gates are kept in _GATED: their ids are never reused
                continue
            known = seen.get(key)
            if known is None or known[0]() is not code:  # a code object not looked at yet
                # its own code or code nested in its constants (made into a function by
                # MAKE_FUNCTION, which no audit event announces), as it is or a copy
                known = seen[key] = (ref(code), cat.lablib_code(code) is not None, None, -1)
            if known[3] != size:  # ready-made rows added since (a module imported)
                known = seen[key] = (*known[:2], _ready_name(ready, code) is not None, size)
            if known[1] or known[2]:
                found.append(obj)
    return found


#: id(code) -> (a weak reference to the code object, whether it is lablib's code or a
#: copy, whether it is a ready-made function's, the size of the ready-made table then):
#: each code object is looked at once per process, not once per window; a dead
#: reference says its id was reused.
_CODE_SEEN: dict = {}


def message(found) -> str:
    """The failure a cribbed probe gets: one sentence naming what was used."""
    crib = found if isinstance(found, Crib) else Crib(str(found), _kind(str(found)))
    asks = "this piece asks you to write it yourself (NumPy or Keras operations), so this test gives no points for it"
    if crib.kind == "reference":
        return f"your code calls {crib.name}, the grader's own reference; {asks}."
    if crib.kind == "ready-made" and crib.name in _LOADERS:
        return (
            f"your code calls {crib.name} while the test runs: a saved or exported TensorFlow "
            f"definition records none of the code it was made from, so what it runs cannot be "
            f"told from lablib's own implementation; {asks}."
        )
    if crib.kind == "ready-made":
        return f"your code calls {crib.name}, a ready-made implementation; {asks}."
    if crib.kind == "copy":
        whose = (
            "the grader's own reference"
            if _kind(crib.name) == "reference"
            else "lablib's own implementation"
        )
        return f"your code runs a copy of {crib.name} ({whose}), found as a copied classmate's code would be; {asks}."
    if crib.kind == "file":
        return f"your code reads lablib's file {crib.name} while the test runs; {asks}."
    if crib.kind == "compiled":
        return f"your code compiles code under lablib's file name {crib.name} while the test runs; {asks}."
    if crib.kind == "refused":
        return (
            f"your code calls {crib.name} while the test runs, which a piece written by hand has no "
            f"need of; this test gives no points for it."
        )
    if crib.kind == "tamper":
        return (
            f"your code changed lablib's grading code ({crib.name}), so this test cannot be judged; "
            f"it gives no points."
        )
    if crib.kind == "graph":
        return (
            f"your code runs {crib.name}, which records none of the code it was made from, "
            f"so it cannot be told from lablib's own implementation; {asks}."
        )
    if crib.kind == "frame":
        return (
            f"a thread your code started was running {crib.name} when the test began (what "
            f"runs there is lablib's code as it was, whatever the test does); {asks}."
        )
    if crib.kind == "process":
        return (
            f"{crib.name} is running while the test runs: what it computes for your code cannot "
            f"be judged as your own, so this test gives no points for it (a piece written by "
            f"hand has no need of another process; a multiprocessing pool's helper processes, "
            f"its resource tracker or fork server, outlive the pool: leave multiprocessing out "
            f"of graded cells)."
        )
    if crib.kind == "thread":
        return (
            f"{crib.name} was still running after the test, so what it computes cannot be judged; "
            f"this test gives no points for it."
        )
    return f"your code calls {crib.name}, lablib's own implementation; {asks}."
