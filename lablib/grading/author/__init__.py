"""Course authoring: what instructors and teaching assistants make from the solutions.

* :mod:`.assignment` - the blank lab from a solution notebook (``lablib assign``).
* :mod:`.catalog` - where a lab's released (blank) notebook is found when grading.
* :mod:`.autograder` - the Gradescope zip of a lab (``lablib gradescope``).
* :mod:`.distwheel` - a wheel of the running lablib, shipped in that zip.
"""
