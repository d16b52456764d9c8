import numpy as np
import pytest
from scipy import ndimage

from tilelabel import connectivity as c


@pytest.mark.parametrize(
    "ndim, given, expected",
    [
        (2, None, 8),
        (2, 1, 4),
        (2, 2, 8),
        (2, 4, 4),
        (2, 8, 8),
        (3, None, 26),
        (3, 1, 6),
        (3, 2, 18),
        (3, 3, 26),
        (3, 6, 6),
        (3, 18, 18),
        (3, 26, 26),
    ],
)
def test_normalize(ndim, given, expected):
    assert c.normalize(ndim, given) == expected
    if given is not None and given <= ndim:
        s = ndimage.generate_binary_structure(ndim, given)
        assert c.normalize(ndim, structure=s) == expected
        assert c.structure(ndim, expected).sum() - 1 == expected


@pytest.mark.parametrize("ndim, bad", [(2, 6), (2, 0), (3, 8), (3, 4), (3, 27)])
def test_invalid_connectivity(ndim, bad):
    with pytest.raises(ValueError, match=f"connectivity {bad} is not valid"):
        c.normalize(ndim, bad)


def test_structures():
    with pytest.raises(ValueError, match="shape"):
        c.normalize(2, structure=np.ones((3, 3, 3)))
    with pytest.raises(ValueError, match="standard"):
        c.normalize(2, structure=np.eye(3))
    with pytest.raises(ValueError, match="2D and 3D"):
        c.normalize(4)


def test_max_components_is_reached():
    # the bound must hold; for full connectivity a lattice of isolated voxels reaches it
    img = np.zeros((5, 7, 4), np.uint8)
    img[::2, ::2, ::2] = 1
    assert ndimage.label(img, np.ones((3, 3, 3)))[1] == c.max_components(img.shape, 26)
    checker = (np.indices((5, 7)).sum(0) % 2 == 0).astype(np.uint8)
    assert ndimage.label(checker)[1] == c.max_components((5, 7), 4)
