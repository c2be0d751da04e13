"""Public tests of each lab, one module per lab, written with lablib.grading.spec."""
