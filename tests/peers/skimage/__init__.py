"""scikit-image's own regionprops tests, run against :mod:`tilelabel.measure`.

``test_regionprops.py`` is scikit-image's ``tests/skimage/measure/test_regionprops.py`` at
commit 03fe0c0 (the tests of scikit-image 0.26, whose wheels ship none), under scikit-image's
BSD-3-Clause licence (``LICENSE.txt``). It is unchanged but for the import a user swaps:
``regionprops`` and ``regionprops_table`` come from ``tilelabel.measure``; the private helpers
it checks them with stay scikit-image's.
"""
