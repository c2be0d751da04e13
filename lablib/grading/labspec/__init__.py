"""A lab's tests: what a test is (:mod:`.model`: graded pieces, probes, judges, the
lab's spec) and where a lab's tests come from (:mod:`.registry`: the specs loaded in
this process, the shipped spec files, a course's own by path, hidden tests). Spec files
import both halves through :mod:`lablib.grading.spec`."""
