"""The peers' own label tests, unchanged, against tilelabel after the import swap a user makes.

scipy installs its test suite with it: its ``scipy.ndimage`` measurement tests run here with
``scipy.ndimage.label`` replaced by :func:`tilelabel.ndimage.label` (:mod:`.swap_scipy`).
scikit-image's regionprops tests are kept in :mod:`tests.peers.skimage`, with the import swapped.
dask-image and cc3d ship no tests in their wheels; tests/test_ndimage.py and tests/test_cc3d.py
compare tilelabel with those libraries' own functions instead.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_scipy_label_tests_pass_with_tilelabel_swapped_in():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.peers.swap_scipy",
         "--pyargs", "scipy.ndimage.tests.test_measurements", "-q", "-k", "label"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    tail = done.stdout[-3000:]
    assert done.returncode == 0, tail
    passed = int(re.search(r"(\d+) passed", tail).group(1))
    assert passed >= 20 and " failed" not in tail and " error" not in tail, tail


def test_the_swap_is_made():
    # the plugin's swap is what the suite above calls: a structure scipy's label refuses
    # (not centrosymmetric) is refused by tilelabel's own message
    code = (
        "import tests.peers.swap_scipy, scipy.ndimage as nd, numpy as np\n"
        "try:\n"
        "    nd.label(np.ones((3, 3)), [[1, 1, 0], [0, 1, 0], [0, 0, 0]])\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "centrosymmetric" in done.stdout, done.stderr
