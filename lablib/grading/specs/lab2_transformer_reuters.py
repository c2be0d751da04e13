"""Public tests of Lab 2: a Transformer encoder on Reuters (tf_keras + TF Model Garden).

Probes run in the student's process after the notebook's set-up cells have put it in
legacy mode (``lablib.use_legacy_keras()``); only the ``build_model`` probes import
TensorFlow. Judges run in the grading process and compute expected values there
(scikit-learn's ``f1_score``, lablib's ``positional_encoding``); the ``build_model``
judges recompute the student's model in NumPy from the weights its probe sends
(``_transformer_checks``), never trusting a reported shape, flag or loss.
"""

from __future__ import annotations

import numpy as np

from lablib.grading.spec import diagnose, expect, expect_close, expect_shape, get_lab
from lablib.grading.specs._model_checks import add_model_piece
from lablib.grading.specs._positional_checks import add_encoding_piece
from lablib.grading.expect import Mistake, describe, expect_array, expect_fields
from lablib.grading.expect import expect_number, is_number, numbers
from lablib.grading.specs._attention_checks import large_score_mistakes
from lablib.grading.specs._block_checks import ablation_outputs, block_stages
from lablib.grading.specs._cases import add_case_tests
from lablib.grading.specs._metric_checks import battery, metric_stages
from lablib.grading.specs._transformer_checks import (
    BLOCK_WEIGHTS,
    check_trace_form,
    cross_entropy,
    encoder_block_math,
    trace_model,
    verified_logits,
)

lab = get_lab("lab2_transformer_reuters")  # title and short name: lablib/labs.py


# ----------------------------------------------------------- positional encoding

add_encoding_piece(
    lab,
    table=(64, 32),
    odd=(9, 7),
    odd_hint="Return a float32 NumPy array [length, depth] (the model adds it "
    "to float32 embeddings); an odd depth ends with a sine column.",
)


# ------------------------------------------------------------------- build_model

add_model_piece(
    lab,
    "build_model",
    "build_classifier",
    "Embedding + positional encoding + tfm TransformerEncoderBlock + masked pooling",
)

_SMALL = dict(
    vocabulary_size=40,
    max_length=16,
    embedding_dim=16,
    num_heads=2,
    inner_dim=32,
    num_blocks=2,
    num_classes=4,
)


def _synthetic_batch(seed=0, batch=48, length=12):
    """Post-padded token ids (0 = padding) whose words tell the class: class c uses ids
    4 + 9c ... 12 + 9c, so a working model learns it in a few epochs."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, _SMALL["num_classes"], size=batch).astype(np.int64)
    ids = 4 + 9 * labels[:, None] + rng.randint(0, 9, size=(batch, length))
    lengths = rng.randint(3, length + 1, size=batch)
    ids[np.arange(length)[None, :] >= lengths[:, None]] = 0
    return ids.astype(np.int32), labels


def _build(ns, seed=0, **overrides):
    import tensorflow as tf

    tf.keras.utils.set_random_seed(seed)
    return ns["build_classifier"](**{**_SMALL, "dropout": 0.1, **overrides})


def _first(value):
    return float(value[0] if isinstance(value, (list, tuple)) else value)


# Each build_model probe also sends a trace of the model (its weights and the tensors
# between the recipe's layers, see _transformer_checks): the judge recomputes the
# embedding, the encoder blocks, the pooling and the classifier in NumPy and judges the
# logits it computed itself. A model off the recipe sends no trace (None), and is judged
# on the values its process reports.


def _traced(got, batches):
    """The judge's logits for each named batch, or None (no trace: reported values)."""
    trace = got.get("trace") if isinstance(got, dict) else None
    if trace is None:
        return None
    check_trace_form(trace, batches)
    verified = {name: verified_logits(trace, name, ids) for name, ids in batches.items()}
    return None if any(v is None for v in verified.values()) else verified


def _shape_batches():
    ids, _ = _synthetic_batch()
    return {"short": ids[:3, :7], "full": ids[:5], "max_length": np.ones((2, 16), np.int32)}


@lab.test(
    "build_model",
    points=1,
    hint="The model maps int token ids [B, T] (any T up to "
    "max_length) to one score per class [B, num_classes]; compile it before returning.",
    timeout=120,
)
def output_shapes_and_compiled(ns):
    model = _build(ns)
    batches = _shape_batches()
    got = {name: list(np.shape(model.predict(ids, verbose=0))) for name, ids in batches.items()}
    got["compiled"] = (
        getattr(model, "optimizer", None) is not None and getattr(model, "loss", None) is not None
    )
    got["trace"] = trace_model(model, batches)
    return got


@output_shapes_and_compiled.judge
def _(got):
    expect_fields(got, ("short", "full", "max_length", "compiled", "trace"))
    expect(
        got["compiled"] is True,
        "build_classifier must return a compiled model "
        "(model.compile(...)) with an optimizer and a loss",
    )
    verified = _traced(got, _shape_batches())
    shapes = (
        got
        if verified is None
        else {name: list(logits.shape) for name, (logits, _) in verified.items()}
    )
    for name, ids in (
        ("short", "[3, 7]"),
        ("full", "[5, 12]"),
        ("max_length", "[2, max_length=16]"),
    ):
        wanted = [int(np.shape(_shape_batches()[name])[0]), 4]
        sizes = _sizes(shapes[name])
        expect(
            sizes == wanted,
            f"ids {ids} should give scores {wanted}, got "
            f"{describe(shapes[name]) if sizes is None else sizes}",
        )


def _sizes(value):
    """``value`` when it is a list of sizes (ints), else None (a reply may hold anything)."""
    return value if isinstance(value, list) and all(type(v) is int for v in value) else None


def _one_batch():
    ids, _ = _synthetic_batch(seed=3, batch=4)
    return {"ids": ids}


@lab.test(
    "build_model",
    points=1,
    hint="Use tf.keras.layers.Embedding(..., mask_zero=True) and "
    "num_blocks tfm.nlp.layers.TransformerEncoderBlock layers, built with tf.keras "
    "(legacy mode), not Keras 3.",
    timeout=120,
)
def uses_tfm_blocks_and_masking_embedding(ns):
    model = _build(ns)
    layers = []
    stack = list(model.layers)
    while stack:
        layer = stack.pop(0)
        layers.append(layer)
        stack.extend(getattr(layer, "layers", []) if layer is not model else [])
    return {
        "model_module": type(model).__module__,
        "blocks": sum(
            type(l).__name__ == "TransformerEncoderBlock"
            and type(l).__module__.startswith("official.")
            for l in layers
        ),
        "masking_embeddings": sum(
            type(l).__name__ == "Embedding" and bool(getattr(l, "mask_zero", False)) for l in layers
        ),
        "classes": sorted({f"{type(l).__module__}.{type(l).__name__}" for l in layers}),
        "trace": trace_model(model, _one_batch()),
    }


@uses_tfm_blocks_and_masking_embedding.judge
def _(got):
    expect_fields(got, ("model_module", "blocks", "masking_embeddings", "classes", "trace"))
    expect(
        isinstance(got["model_module"], str) and got["model_module"].startswith("tf_keras"),
        f"the model must be a tf.keras (tf_keras, legacy) model so that the TF Model Garden "
        f"block trains; got a {got['model_module']} model. Run lablib.use_legacy_keras() first "
        f"and build with tf.keras.",
    )
    blocks = got["blocks"]
    if _traced(got, _one_batch()) is not None:  # each block's output recomputed from its weights
        blocks = len(got["trace"]["layers"]["blocks"])
    expect(
        blocks == 2,
        f"num_blocks=2 should give 2 tfm.nlp.layers.TransformerEncoderBlock "
        f"layers, found {blocks} (layers: {got['classes']})",
    )
    expect(
        expect_number(got["masking_embeddings"], "the number of masking embeddings") >= 1,
        "use tf.keras.layers.Embedding(..., mask_zero=True) so that padding (id 0) is masked",
    )


def _padding_batches():
    ids, _ = _synthetic_batch(seed=1, batch=8, length=10)
    return {"plain": ids, "padded": np.concatenate([ids, np.zeros((8, 6), np.int32)], axis=1)}


@lab.test(
    "build_model",
    points=1,
    hint="Padding must not change a prediction: pass an attention "
    "mask to the blocks (tfm.nlp.layers.SelfAttentionMask) and the padding mask to "
    "GlobalAveragePooling1D(...)(x, mask=...).",
    timeout=120,
)
def padding_does_not_change_predictions(ns):
    model = _build(ns)
    batches = _padding_batches()
    got = {name: np.asarray(model.predict(ids, verbose=0)) for name, ids in batches.items()}
    got["trace"] = trace_model(model, batches)
    return got


@padding_does_not_change_predictions.judge
def _(got):
    expect_fields(got, ("plain", "padded", "trace"))
    verified = _traced(got, _padding_batches())
    values = got if verified is None else {name: logits for name, (logits, _) in verified.items()}
    if verified is not None:
        for name in ("plain", "padded"):
            expect_close(
                got[name],
                got["trace"]["batches"][name]["logits"],
                rtol=1e-4,
                atol=1e-4,
                what=f"predictions ({name}) vs the traced model's",
            )
    expect_shape(values["plain"], (8, 4), "predictions for ids [8, 10]")
    expect_shape(values["padded"], (8, 4), "predictions for the same ids padded to [8, 16]")
    expect_close(
        values["padded"],
        values["plain"],
        rtol=1e-4,
        atol=1e-4,
        what="predictions with 6 extra padding tokens vs without",
    )


def _training_batch():
    return _synthetic_batch(seed=2)


@lab.test(
    "build_model",
    points=2,
    hint="Every trainable weight must change in training, the "
    "tfm blocks included (a tfm block inside a Keras 3 model silently never trains), "
    "and the loss must fall on a small learnable batch.",
    timeout=240,
)
def learns_and_trains_every_weight(ns):
    model = _build(ns, dropout=0.0)
    ids, labels = _training_batch()
    before = [np.array(w.numpy()) for w in model.trainable_weights]
    names = [w.name for w in model.trainable_weights]
    loss_before = _first(model.evaluate(ids, labels, verbose=0))
    trace_before = trace_model(model, {"train": ids})
    model.fit(ids, labels, batch_size=16, epochs=8, verbose=0, shuffle=False)
    loss_after = _first(model.evaluate(ids, labels, verbose=0))
    changes = [
        float(np.max(np.abs(np.array(w.numpy()) - b)))
        for w, b in zip(model.trainable_weights, before)
    ]
    return {
        "loss_before": loss_before,
        "loss_after": loss_after,
        "names": names,
        "changes": changes,
        "trace_before": trace_before,
        "trace_after": trace_model(model, {"train": ids}),
    }


# A key bias adds the same q.b_k to every score of a query, which the softmax ignores:
# its gradient is zero, so it is the one weight allowed to stay put.
_MAY_STAY = "key/bias"


@learns_and_trains_every_weight.judge
def _(got):
    import math

    expect_fields(
        got, ("loss_before", "loss_after", "names", "changes", "trace_before", "trace_after")
    )
    ids, labels = _training_batch()
    batches = {"train": ids}
    traced = got["trace_before"] is not None or got["trace_after"] is not None
    verified = None
    if traced:
        before, after = (
            _traced({"trace": got["trace_before"]}, batches),
            _traced({"trace": got["trace_after"]}, batches),
        )
        if before is not None and after is not None:
            verified = (
                cross_entropy(before["train"][1], labels),
                cross_entropy(after["train"][1], labels),
            )
            # The traced layers' weights, before and after, decide which ones moved.
            old, new = got["trace_before"]["weights"], got["trace_after"]["weights"]
            expect(
                set(old) == set(new) and all(set(old[k]) == set(new[k]) for k in old),
                "the traces before and after training name different weights",
            )
            _expect_traced_weights_moved(old, new)
    loss_before, loss_after = verified or (
        expect_number(got["loss_before"], "the loss before training"),
        expect_number(got["loss_after"], "the loss after training"),
    )
    expect(
        math.isfinite(loss_before) and math.isfinite(loss_after),
        f"losses must be finite, got {loss_before} -> {loss_after}",
    )
    expect(
        loss_after < 0.6 * loss_before,
        f"the loss should fall well below its start after 8 epochs on 48 sequences whose "
        f"words give away the class: {loss_before:.4f} -> {loss_after:.4f}",
    )
    names, changes = got["names"], got["changes"]
    expect(
        isinstance(names, list)
        and all(isinstance(n, str) for n in names)
        and isinstance(changes, list)
        and len(changes) == len(names)
        and all(is_number(c) for c in changes),
        "the trainable weights' names and changes: expected a list of names and a list of as "
        f"many numbers, got {describe(names)} and {describe(changes)}",
    )
    expect(
        len(names) >= 10,
        f"expected the embedding, 2 encoder blocks and a classifier "
        f"as trainable weights; found only {names}",
    )
    frozen = [n for n, c in zip(names, changes) if not c > 0.0 and _MAY_STAY not in n]
    expect(
        not frozen,
        f"these weights never changed during training: {frozen[:6]}. A "
        f"tf_keras layer inside a Keras 3 model (or the reverse) is never trained.",
    )


def _expect_traced_weights_moved(old, new):
    """Every weight of the traces before and after training (both of
    :func:`check_trace_form`'s form, recomputed) has one shape in both and moved, the key
    bias excepted; compared only where the shapes agree, so that no reply makes the judge
    broadcast one array against another."""
    frozen = []
    for layer in old:
        for name in old[layer]:
            before, after = numbers(old[layer][name]), numbers(new[layer][name])
            expect(
                before is not None and after is not None and before.shape == after.shape,
                f"the weight {layer}/{name} is {describe(old[layer][name])} before training "
                f"and {describe(new[layer][name])} after: the traces before and after "
                "training must hold the same weights",
            )
            if not np.any(before != after) and _MAY_STAY not in name:
                frozen.append(f"{layer}/{name}")
    expect(
        not frozen,
        f"these weights never changed during training: {frozen[:6]}. A "
        f"tf_keras layer inside a Keras 3 model (or the reverse) is never trained.",
    )


# ---------------------------------------------------------------------- macro_f1

lab.piece(
    "macro_f1",
    objects=["macro_f1"],
    description="macro-averaged F1 score, the metric for 46 unbalanced topics",
    error_hints=[
        (
            r"cannot reshape array",
            "A reshape asks for another size than the labels': flatten them with "
            "np.asarray(y).reshape(-1) (or .ravel()).",
        ),
        (
            r"^ValueError",
            "Your function raised ValueError on valid labels (as many predictions as labels, "
            "every id in [0, num_classes)): a condition of your input checks is the wrong way "
            "round, or checks the wrong bound.",
        ),
        (
            r"IndexError|out of bounds",
            "An index is out of range: the confusion matrix is num_classes x num_classes, "
            "indexed by (true label, predicted label).",
        ),
    ],
)


def _sk_macro_f1(y_true, y_pred):
    from sklearn.metrics import f1_score

    return float(f1_score(y_true, y_pred, average="macro", zero_division=0))


_HAND = ([0, 0, 1, 1, 2, 2, 2], [0, 1, 1, 1, 2, 0, 2])


def _random_labels():
    rng = np.random.RandomState(5)
    y_true = rng.choice(46, size=400, p=np.r_[[0.35, 0.2], np.full(44, 0.45 / 44)])
    y_pred = np.where(rng.rand(400) < 0.6, y_true, rng.randint(0, 46, size=400))
    return y_true, y_pred


#: Classes 1, 2, 4, 6, 7 of 8 absent, class 5 never predicted.
_ABSENT = ([0, 0, 0, 3, 3, 5], [0, 0, 3, 3, 3, 0])


def run_macro_f1(ns, labels, num_classes, perfect):
    """Probe side: the student's ``macro_f1`` on ``labels = (y_true, y_pred)``, with
    ``perfect`` also on y_true against itself, and the :func:`battery` that
    :func:`metric_stages` reads."""
    y_true, y_pred = (np.array(y) for y in labels)
    values = {"f1": float(ns["macro_f1"](y_true, y_pred, num_classes))}
    if perfect:
        values["perfect"] = float(ns["macro_f1"](y_true, y_true, num_classes))
    values["battery"] = battery(ns["macro_f1"])
    return values


def judge_macro_f1(got, labels, num_classes, perfect, what):
    """One macro_f1 test's judge: the step-by-step diagnosis (:func:`metric_stages`),
    then the value against scikit-learn's (and 1 for perfect predictions)."""
    expect_fields(got, ("f1", "perfect", "battery") if perfect else ("f1", "battery"))
    metric_stages(got["battery"], own=(got["f1"], *labels, num_classes))
    expect_close(got["f1"], _sk_macro_f1(*labels), rtol=1e-6, atol=1e-9, what=what)
    if perfect:
        expect_close(got["perfect"], 1.0, atol=1e-9, what="macro-F1 of perfect predictions")


add_case_tests(
    lab,
    "macro_f1",
    run_macro_f1,
    judge_macro_f1,
    [
        (
            "small_example",
            1,
            "Per class F1 = 2 TP / (2 TP + FP + FN); macro-F1 is their plain mean over the classes.",
            (_HAND, 3, False),
            ["macro_f1([0,0,1,1,2,2,2], [0,1,1,1,2,0,2], 3)"],
        ),
        (
            "many_unbalanced_classes",
            2,
            "Average over the classes that occur in y_true or y_pred "
            "(as scikit-learn); a class that is never predicted has F1 = 0.",
            (_random_labels(), 46, False),
            ["macro-F1 on 400 labels of 46 unbalanced classes"],
        ),
        (
            "absent_and_never_predicted_classes",
            1,
            "A class absent from both y_true and y_pred is left out of "
            "the mean; a class in y_true that is never predicted counts as F1 = 0.",
            (_ABSENT, 8, True),
            ["macro-F1 with classes 1, 2, 4, 6, 7 absent and class 5 never predicted"],
        ),
    ],
)


@lab.test(
    "macro_f1",
    points=1,
    hint="Raise ValueError when a label is outside [0, num_classes) "
    "or when y_true and y_pred differ in length, saying what was given.",
)
def bad_input_raises(ns):
    results = {}
    for case, args in {
        "label_too_large": ([0, 1, 5], [0, 1, 1], 3),
        "negative_label": ([0, -1], [0, 0], 3),
        "length_mismatch": ([0, 1, 2], [0, 1], 3),
    }.items():
        try:
            ns["macro_f1"](np.array(args[0]), np.array(args[1]), args[2])
            results[case] = "no error"
        except ValueError:
            results[case] = "ValueError"
        except Exception as error:  # noqa: BLE001 - report which error it was
            results[case] = type(error).__name__
    return results


@bad_input_raises.judge
def _(got):
    what = {
        "label_too_large": ("a label >= num_classes", "labels.max() >= num_classes"),
        "negative_label": ("a negative label", "labels.min() < 0"),
        "length_mismatch": (
            "y_true and y_pred of different lengths",
            "y_true.shape != y_pred.shape",
        ),
    }
    expect_fields(got, tuple(what), "what each call with bad labels raised")
    expect(
        all(isinstance(outcome, str) for outcome in got.values()),
        "what each call with bad labels raised: expected the name of an error (or 'no error') "
        f"per case, got {[describe(v) for v in got.values()][:6]}",
    )
    for case, outcome in got.items():
        if case in what and outcome != "ValueError":
            given, test = what[case]
            if outcome == "no error":
                raise Mistake(
                    f"{given[0].upper()}{given[1:]} passes your checks without an error: "
                    f"raise ValueError when {test}, saying what was given."
                )
            raise Mistake(
                f"{given[0].upper()}{given[1:]} reaches your computation ({outcome}) "
                f"before any check: test {test} first and raise ValueError."
            )
        expect(outcome == "ValueError", f"{case}: expected a ValueError, got {outcome}")


# ------------------------------------------------------------ written answers (a person)
# Found in the submission by their cell's tag or markers (lablib.grading.notebook.
# written_answers); graded with `lablib review`. The rubric is where the page starts:
# graders edit, add and apply its items there.

lab.answer(
    "metric",
    points=4,
    title="section 2: why this metric, with numbers from the data",
    rubric=[
        # Most of the facts are on the page (cells of sections 1 and 2): the points go to the argument
        # built from them. Restating a printed number without the consequence drawn from it earns nothing.
        (
            1,
            "Uses the imbalance, with numbers from these data (earn and acq more than half of the wires; a "
            "dozen topics with fewer than 20), to say what each metric weighs: accuracy every wire equally, "
            "macro-F1 every topic equally, precision and recall together.",
        ),
        (
            1,
            "Draws the consequence for ranking models: accuracy mostly measures the large topics (answering "
            "the largest topic alone scores about 0.35 accuracy and 0.01 macro-F1), so a model can gain "
            "accuracy while losing the small topics.",
        ),
        (
            1,
            "Weighs the cost of the choice on these data: the validation macro-F1 on 899 wires is noisy (16 "
            "topics with one or two wires), or accuracy hides the small topics; and says why the answer "
            "accepts that cost.",
        ),
        (
            1,
            "Says how the metric is used: variants compared on validation, the test set used once at the end.",
        ),
        (
            0,
            "Either metric can earn full marks (4/4): macro-F1 argued from the imbalance, or accuracy argued "
            "from macro-F1's noise on these validation wires, the small topics it hides named and accepted "
            "(the study's model answer allows accuracy in that case). A choice without a reason from these "
            "data earns at most the points of the facts it uses.",
        ),
        (0, "No answer."),
    ],
)
lab.answer(
    "study",
    points=6,
    title="section 7: your variants and metric, justified from your own table",
    rubric=[
        (
            2,
            "At least three variants, each with the question it asks, one change at a time (a combination is "
            "fine when the answer says it is the point).",
        ),
        (1, "Names the metric that ranks the variants and justifies it from section 2."),
        (
            2,
            "Reads the table with its noise, as section 7 states it: a difference of about a point or less of "
            "validation accuracy, or about three points or less of validation macro-F1, is not called a "
            "finding; a larger one may be. One point if the answer applies a threshold but a wrong one "
            "(e.g. one point of macro-F1) or applies it to some rows only.",
        ),
        (
            1,
            "Uses the curves (over-fitting, under-training) or the cost of a variant (parameters, seconds), "
            "or says what the budget (3 epochs, 128 tokens) may hide (a slow starter such as RMSprop).",
        ),
        (0, "No answer."),
    ],
)
lab.answer(
    "find_error",
    points=5,
    title="section 8: the error in the lecture's positional encoding",
    rubric=[
        (
            2,
            "The exponent uses the column j instead of 2*floor(j/2): the sine and cosine of a pair get different "
            "frequencies.",
        ),
        (
            1,
            "Why it matters: PE(p+k) is no longer a linear map of PE(p), so relative positions are lost.",
        ),
        (
            1,
            "The frequencies fall twice as fast: half of the columns hardly move over realistic lengths.",
        ),
        (
            0.5,
            "The example p_1 is wrong too: it numbers the columns from 1 (it starts with a cosine), or its "
            "last entry shows the doubled exponent (10000^2).",
        ),
        (
            0.5,
            "The concatenated layout (all sines, then all cosines) is not an error: the same columns in "
            "another order, each sine with a cosine of its frequency.",
        ),
        (
            0,
            "An answer that reads the lab sheet's 'error in the Tensorflow-NLP version of the notebook' "
            "differently (a tfm block without an attention mask, a tfm block in a Keras 3 model) gets no "
            "points for that reading: section 8 asks about the lecture's formula.",
        ),
        (0, "No answer."),
    ],
)


# ------------------------------------------------------------------ encoder_block

lab.piece(
    "encoder_block",
    objects=["encoder_block"],
    description="the encoder layer of the lecture Advanced Machine Learning: Transformers by hand in "
    "NumPy, weight for weight tfm's block",
    error_hints=[
        (
            r"can only concatenate str|KeyError",
            "A weight is looked up under a name the weights dict does not have: index it with "
            "the weight's own name, e.g. w['query_kernel'] (sorted(w) lists the 16 names).",
        ),
        (
            r"repeated axis in transpose|axes don't match array",
            "A transpose's axis order does not fit: K [heads, T, d_k] becomes [heads, d_k, T] "
            "with K.transpose(0, 2, 1) (each axis once), or np.swapaxes(K, -1, -2).",
        ),
        (
            r"axis -?\d+ is out of bounds for array of dimension",
            "An axis number is out of range: Q, K and V per head are [heads, T, d_k] and the "
            "scores [heads, T, T], 3 axes (0, 1, 2, or -1 for the last); K becomes "
            "[heads, d_k, T] with K.transpose(0, 2, 1), and the softmax runs over axis -1.",
        ),
        (
            r"operands could not be broadcast together",
            "Two arrays do not broadcast: a row's maximum or total must keep its axis "
            "(keepdims=True) to divide the scores [heads, T, T], and a mask over the keys [T] "
            "broadcasts as mask[None, None, :].",
        ),
        (
            r"mismatch in its core dimension|shapes .* not aligned|einstein sum subscripts",
            "A product's shapes do not fit: per head, Q K^T is [T, d_k] @ [d_k, T], weights @ V "
            "is [T, T] @ [T, d_k]; the feed-forward network is Z [T, d] @ intermediate_kernel "
            "[d, inner], then [T, inner] @ output_kernel [inner, d].",
        ),
    ],
)

#: The names of the weights dict the student's ``encoder_block`` reads, in the order of
#: ``block.get_weights()`` of tfm's and lablib's blocks.
BLOCK_NAMES = tuple(name for name, _ in BLOCK_WEIGHTS)
EPSILON = 1e-12  # tfm's norm_epsilon (the lab's blocks keep the default)


def block_case(seed, length, width, heads, key_dim, inner):
    """(X [T, d], weights {name: array}) with random weights, layer norms included."""
    rng = np.random.default_rng(seed)
    shapes = {
        "query_kernel": (width, heads, key_dim),
        "query_bias": (heads, key_dim),
        "key_kernel": (width, heads, key_dim),
        "key_bias": (heads, key_dim),
        "value_kernel": (width, heads, key_dim),
        "value_bias": (heads, key_dim),
        "attention_output_kernel": (heads, key_dim, width),
        "attention_output_bias": (width,),
        "attention_norm_gamma": (width,),
        "attention_norm_beta": (width,),
        "intermediate_kernel": (width, inner),
        "intermediate_bias": (inner,),
        "output_kernel": (inner, width),
        "output_bias": (width,),
        "output_norm_gamma": (width,),
        "output_norm_beta": (width,),
    }
    weights = {name: rng.normal(0, 0.6, shapes[name]) for name in BLOCK_NAMES}
    weights["attention_norm_gamma"] += 1.0
    weights["output_norm_gamma"] += 1.0
    return rng.normal(size=(length, width)), weights


#: The tests' cases: (seed, T, d, heads, key size, inner size) and the real tokens.
WORKED = ((5, 3, 4, 2, 2, 6), None)
PADDED = ((6, 5, 4, 2, 3, 8), np.array([True, True, True, False, False]))
WIDER = ((7, 7, 8, 4, 2, 16), None)


def reference_block(x, weights, mask=None, **mistake):
    """The judge's block on one sequence: ``(output [T, d], attention [heads, T, T])``;
    ``mistake``: :func:`encoder_block_math`'s switches."""
    suffixes = dict(BLOCK_WEIGHTS)
    allowed = (
        None
        if mask is None
        else np.broadcast_to(np.asarray(mask, bool)[None, :], (len(mask), len(mask)))
    )
    return encoder_block_math(
        x,
        allowed,
        {suffixes[k]: v for k, v in weights.items()},
        lambda z: np.maximum(z, 0.0),
        EPSILON,
        **mistake,
    )


def block_mistakes(x, weights, mask=None):
    """``(output, sentence)`` of the typical mistakes in the encoder block."""
    cases = [
        (
            dict(scale=False),
            "The attention scores are not scaled: divide Q K^T by sqrt(d_k), "
            "d_k the key size of one head (here query_kernel.shape[-1]).",
        ),
        (
            dict(norm_first=True),
            "Layer normalisation comes before each sublayer (pre-norm, "
            "x + F(LayerNorm(x))); the lecture's encoder (Advanced Machine "
            "Learning: Transformers), like tfm's default block, normalises "
            "after the residual: LayerNorm(x + F(x)).",
        ),
        (
            dict(attention_residual=False),
            "The residual around the attention is missing: "
            "Z = LayerNorm(MultiHead(X) + X), not LayerNorm(MultiHead(X)).",
        ),
        (
            dict(ffn_residual=False),
            "The residual around the feed-forward network is missing: "
            "LayerNorm(FFN(Z) + Z), not LayerNorm(FFN(Z)).",
        ),
        (
            dict(norm_axis=0),
            "Layer normalisation is taken over the tokens (axis 0); it "
            "normalises each token's vector over its d features (axis -1).",
        ),
        (
            dict(variance_ddof=1),
            "The layer norm's variance divides by d - 1 (np.var or np.std "
            "with ddof=1); layer normalisation divides by d (ddof=0).",
        ),
        (
            dict(softmax_axis=-2),
            "The softmax runs over the queries (axis -2); each query's "
            "weights over the keys (the last axis) must sum to 1.",
        ),
    ]
    out = [(reference_block(x, weights, mask, **switch)[0], sentence) for switch, sentence in cases]
    suffixes = dict(BLOCK_WEIGHTS)
    linear = encoder_block_math(
        x,
        None
        if mask is None
        else np.broadcast_to(np.asarray(mask, bool)[None, :], (len(mask),) * 2),
        {suffixes[k]: v for k, v in weights.items()},
        lambda z: z,
        EPSILON,
    )[0]
    out.append(
        (
            linear,
            "The feed-forward network has no ReLU between its two linear layers: "
            "FFN(X) = Linear2(ReLU(Linear1(X))).",
        )
    )
    if mask is not None:
        out.append(
            (
                reference_block(x, weights, None)[0],
                "The mask is ignored: padded tokens (mask False) must get zero attention "
                "weight as keys.",
            )
        )
    return out


#: The factor :func:`large_scores` multiplies the query projection by: the WIDER case's
#: attention scores then reach about 1e3 (up to 1800), where np.exp overflows.
LARGE = 150.0


def large_scores(weights):
    """A copy of the block's ``weights`` with the query kernel and bias times :data:`LARGE`:
    every score times 150, so only a softmax that subtracts each row's largest score
    before np.exp stays finite."""
    return {
        k: np.array(v, copy=True) * (LARGE if k in ("query_kernel", "query_bias") else 1.0)
        for k, v in weights.items()
    }


def _call_block(ns, x, weights, mask):
    """(Probe side.) The student's block on copies of its arguments, as float arrays."""
    result = ns["encoder_block"](
        x.copy(),
        {k: v.copy() for k, v in weights.items()},
        mask=None if mask is None else mask.copy(),
        epsilon=EPSILON,
    )
    expect(
        isinstance(result, tuple) and len(result) == 2,
        "encoder_block must return (output, attention weights)",
    )
    return {
        "output": np.asarray(result[0], dtype=float),
        "attention": np.asarray(result[1], dtype=float),
    }


def run_block(ns, case, large=False):
    """Probe side: the block on ``case`` (and, with ``large``, on :func:`large_scores`)."""
    (seed, length, width, heads, key_dim, inner), mask = case
    x, weights = block_case(seed, length, width, heads, key_dim, inner)
    got = {
        **_call_block(ns, x, weights, mask),
        # the block on weights with a sublayer zeroed, for the judge's diagnosis
        "ablations": ablation_outputs(ns["encoder_block"], x, weights, mask, EPSILON),
    }
    if large:
        got["large"] = _call_block(ns, x, large_scores(weights), mask)
    return got


def _judge_large_scores(got, x, weights, mask, what):
    """The block with attention scores around 1e3 (:func:`large_scores`): finite, each
    query's weights summing to 1 over the real keys, close to the reference."""
    expect_fields(got, ("output", "attention"), f"the block's (output, attention) {what}")
    output, attention = reference_block(x, weights, mask)
    got = {
        "output": expect_array(got["output"], output.shape, f"output {what}"),
        "attention": expect_array(
            got["attention"], attention.shape, f"attention weights {what} [heads, T, T]"
        ),
    }
    allowed = None if mask is None else np.asarray(mask, bool)
    large_score_mistakes(got["attention"], got["output"], allowed, what, lead=("head",))
    # the numerics alone (the other cases judge the steps), loosely enough for float32
    expect_close(
        got["attention"], attention, rtol=1e-3, atol=1e-6, what=f"attention weights {what}"
    )
    expect_close(got["output"], output, rtol=1e-3, atol=1e-5, what=f"output {what}")


def judge_block(got, case, what, large=False):
    (seed, length, width, heads, key_dim, inner), mask = case
    x, weights = block_case(seed, length, width, heads, key_dim, inner)
    expect_fields(got, ("output", "attention", *(("large",) if large else ())))
    output, attention = reference_block(x, weights, mask)
    got = {
        **got,
        "output": expect_array(got["output"], (length, width), f"output {what}"),
        "attention": expect_array(
            got["attention"], (heads, length, length), f"attention weights {what} [heads, T, T]"
        ),
    }
    diagnose(got["output"], block_mistakes(x, weights, mask), right=output, atol=1e-6)
    block_stages(got, x, weights, mask, reference_block)
    expect_close(got["attention"], attention, atol=1e-6, what=f"attention weights {what}")
    expect_close(got["output"], output, atol=1e-6, what=f"output {what}")
    if large:
        _judge_large_scores(
            got["large"], x, large_scores(weights), mask, f"{what}, query projection x{LARGE:g}"
        )


def _block_test(name, points, case, what, hint, large=False):
    """One ``encoder_block`` test: the student's block on ``case``, judged against
    :func:`reference_block` (mistakes named first); with ``large``, then on the same case
    with scores around 1e3 (:func:`large_scores`)."""
    lab.test("encoder_block", points=points, hint=hint, name=name)(
        lambda ns: run_block(ns, case, large)
    ).judge(lambda got: judge_block(got, case, what, large))


_block_test(
    "block_worked_example",
    2,
    WORKED,
    "on 3 tokens of width 4, 2 heads",
    "Per head: Q = X @ query_kernel[:, h] + query_bias[h] (same for K, V), weights = "
    "softmax(Q K^T / sqrt(d_k)) over the keys, heads = weights @ V; MultiHead = the "
    "heads through attention_output_kernel [heads, d_k, d] + its bias; then "
    "Z = LayerNorm(MultiHead + X) and LayerNorm(FFN(Z) + Z), FFN with a ReLU.",
)
_block_test(
    "block_padding",
    1,
    PADDED,
    "on 5 tokens, the last 2 padding",
    "mask[t] is False for padding: give those keys zero weight (a score of -inf, or "
    "-1e9 as tf_keras adds, before the softmax) in every query's row.",
)
_block_test(
    "block_wider",
    1,
    WIDER,
    "on 7 tokens of width 8, 4 heads",
    "Loop over the heads or use einsum; every weight shape comes from the weights "
    "dict (4 heads of size 2 on width 8 here, inner size 16).",
    large=True,
)
