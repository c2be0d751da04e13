"""Lab 2's ``macro_f1`` piece: which part of the student's macro-F1 went wrong.

The student's ``macro_f1(y_true, y_pred, num_classes)`` returns one number. The probe
also runs it on a small battery of label sets (:func:`battery`) chosen so that each part
of the computation shows on its own: perfect predictions (every class's F1 is 1, so only
the true positives and the mean can be wrong), perfect predictions with classes absent
(only the set of classes averaged over can be wrong), and label sets on which the usual
wrong metrics (precision, recall or accuracy instead of F1, a mean over all classes, a
mean weighted by support, Jaccard's TP / (TP + FP + FN)) all give different values.
:func:`metric_stages` compares those values with the judge's own and names the first
part that is wrong.
"""

from __future__ import annotations

import numpy as np

from lablib.grading.expect import Mistake

__all__ = ["battery", "metric_stages", "variants"]

#: (y_true, y_pred, num_classes) of the battery, by name.
CASES = {
    "perfect": ([0, 1, 2, 2, 1, 0, 2], [0, 1, 2, 2, 1, 0, 2], 3),
    "perfect_absent": ([0, 3, 3, 0, 5], [0, 3, 3, 0, 5], 8),
    "mixed_a": ([0, 0, 0, 1, 1, 2, 2, 2, 2, 3], [0, 1, 0, 1, 2, 2, 2, 0, 2, 3], 5),
    "mixed_b": ([0, 0, 1, 1, 1, 1, 2, 3, 3, 3, 4, 4], [0, 1, 1, 1, 3, 1, 2, 3, 0, 3, 4, 0], 6),
    "mixed_c": ([1, 1, 1, 1, 1, 0, 2, 2], [1, 1, 0, 1, 2, 0, 2, 1], 4),
    "one_error": ([0, 0, 1], [0, 0, 2], 3),
}


def battery(macro_f1):
    """(Probe side.) The student's ``macro_f1`` on every case: a float, or the error's
    type name when it raised."""
    values = {}
    for name, (y_true, y_pred, classes) in CASES.items():
        try:
            values[name] = float(macro_f1(np.array(y_true), np.array(y_pred), classes))
        except Exception as error:  # noqa: BLE001 - the value tests report the error itself
            values[name] = type(error).__name__
    return values


def _counts(y_true, y_pred, classes):
    confusion = np.zeros((classes, classes))
    np.add.at(confusion, (np.asarray(y_true), np.asarray(y_pred)), 1)
    tp = np.diag(confusion)
    return tp, confusion.sum(0) - tp, confusion.sum(1) - tp, confusion.sum(1)


def _mean_over(per_class, present):
    return float(np.mean(per_class[present])) if present.any() else 0.0


def variants(y_true, y_pred, classes):
    """``{name: value}``: macro-F1 and the usual wrong metrics on one label set."""
    tp, fp, fn, support = _counts(y_true, y_pred, classes)
    present = (tp + fp + fn) > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = np.where(present, 2 * tp / (2 * tp + fp + fn), 0.0)
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        recall = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
        jaccard = np.where(present, tp / (tp + fp + fn), 0.0)
    return {
        "right": _mean_over(f1, present),
        "all_classes": float(np.mean(f1)),
        "true_classes_only": _mean_over(f1, support > 0),
        "right_predictions_only": _mean_over(f1, tp > 0),
        "weighted": float(np.sum(f1 * support) / np.sum(support)),
        "sum": float(np.sum(f1)),
        "precision": _mean_over(precision, present),
        "recall": _mean_over(recall, present),
        "accuracy": float(np.mean(np.asarray(y_true) == np.asarray(y_pred))),
        "jaccard": _mean_over(jaccard, present),
    }


SENTENCES = {
    "all_classes": "Your mean runs over all num_classes classes, absent ones counted as F1 = 0: "
    "average only over the classes that occur in y_true or y_pred.",
    "true_classes_only": "Your mean leaves out the classes that are predicted but never true: a "
    "class that occurs in y_pred only has F1 = 0 and counts in the mean.",
    "right_predictions_only": "Your mean leaves out the classes without a single right "
    "prediction: a class that occurs but is never predicted right has "
    "F1 = 0 and counts in the mean.",
    "weighted": "Your mean weighs each class by its number of true labels (support): macro-F1 "
    "gives every class the same weight, a plain mean of the per-class F1.",
    "sum": "You add up the per-class F1 scores: macro-F1 is their mean.",
    "precision": "Your per-class score is the precision TP / (TP + FP): F1 combines precision and "
    "recall, 2 TP / (2 TP + FP + FN).",
    "recall": "Your per-class score is the recall TP / (TP + FN): F1 combines precision and "
    "recall, 2 TP / (2 TP + FP + FN).",
    "accuracy": "Your function returns the accuracy (the share of right predictions), which is "
    "also the micro-averaged F1: macro-F1 averages the F1 of each class.",
    "jaccard": "Your per-class score is TP / (TP + FP + FN) (the Jaccard index): F1 counts the true "
    "positives twice, 2 TP / (2 TP + FP + FN).",
}


def metric_stages(values, own=None):
    """(Judge side.) Name the part of macro-F1 that is wrong from the battery's values
    and, with ``own = (value, y_true, y_pred, num_classes)``, the test's own case; quiet
    when they are all right or nothing can be named."""
    if not isinstance(values, dict) or set(values) != set(CASES):
        return
    cases = dict(CASES)
    if own is not None and isinstance(own[0], float):
        values = {**values, "own": own[0]}
        cases["own"] = own[1:]
    for name, value in values.items():
        if not isinstance(value, float) and not isinstance(value, str):
            return  # not what the probe sends: the value tests judge the reply
        if isinstance(value, str) and name in CASES:
            y_true, y_pred, classes = CASES[name]
            raise Mistake(
                f"Your macro_f1 raised {value} on valid labels: y_true={y_true}, "
                f"y_pred={y_pred}, num_classes={classes}. Run it on them and see where."
            )
    if not isinstance(values.get("own", 0.0), float):
        return
    if not all(np.isfinite(v) for v in values.values()):
        raise Mistake(
            "Your macro-F1 is NaN or infinite on some labels: a class absent from both "
            "y_true and y_pred has 2 TP + FP + FN = 0, so its F1 divides 0 by 0; leave "
            "such classes out of the mean."
        )
    computed = {name: variants(*case) for name, case in cases.items()}
    if all(np.isclose(values[n], computed[n]["right"], rtol=1e-6, atol=1e-9) for n in cases):
        return
    for variant, sentence in SENTENCES.items():
        if all(np.isclose(values[n], computed[n][variant], rtol=1e-6, atol=1e-9) for n in cases):
            raise Mistake(sentence)
    if not np.isclose(values["perfect"], 1.0, atol=1e-9):
        raise Mistake(
            f"With every prediction right your macro-F1 is {values['perfect']:.4g}, not 1: then every "
            "class has FP = FN = 0 and F1 = 2 TP / 2 TP = 1, so the per-class F1 (2 TP / (2 TP + "
            "FP + FN), nothing added; TP the diagonal of the confusion matrix) or the mean over the "
            "classes is computed wrong."
        )
    if not np.isclose(values["perfect_absent"], 1.0, atol=1e-9):
        raise Mistake(
            f"Perfect predictions score {values['perfect_absent']:.4g} when some of the num_classes "
            "classes never occur: such a class is absent from both y_true and y_pred, and is "
            "left out of the mean."
        )
    raise Mistake(
        "The true positives and the mean are right (perfect predictions score 1, absent classes "
        "are left out), but the errors are counted wrong: for each class, FP = predicted as it, "
        "wrongly (its column's total minus TP), FN = truly it, predicted as another (its row's "
        "total minus TP), and F1 = 2 TP / (2 TP + FP + FN)."
    )
