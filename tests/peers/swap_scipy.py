"""pytest plugin: ``scipy.ndimage.label`` is tilelabel's (the import swap a user makes), for
running scipy's own label tests against it (tests/peers/test_peer_suites.py)."""

import scipy.ndimage
from scipy._lib._array_api import xp_capabilities_table

import tilelabel.ndimage

# scipy's tests look up the array backends a function supports by the function itself
xp_capabilities_table[tilelabel.ndimage.label] = xp_capabilities_table[scipy.ndimage.label]
scipy.ndimage.label = tilelabel.ndimage.label
