"""The run options' one declaration: the CLI flags, the run config keys, the API's signature and
docstring come from it, and a value is checked the same way from each."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import tilelabel
from tilelabel import config, options
from tilelabel.cli import build_parser, main
from tilelabel.options import OptionError, Options


def _label_help() -> str:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    return sub.choices["label"].format_help()


def test_every_option_reaches_every_entry_point():
    """Every option is a keyword of ``label_zarr`` that static tools see: named in its
    signature, or a key of its typed ``**options``, with the option's default."""
    from tilelabel.api import RunOptions

    signature = inspect.signature(tilelabel.label_zarr).parameters
    typed = RunOptions.__annotations__
    doc = tilelabel.label_zarr.__doc__
    helptext = _label_help()
    names = {f.name for f in dataclasses.fields(Options)}
    assert set(typed) == names - {"input", "output", "stats"}
    for f in dataclasses.fields(Options):
        spec = f.metadata["spec"]
        if f.name not in typed:
            assert signature[f.name].default == (
                inspect.Parameter.empty if f.name == "input" else f.default
            ), f.name
        assert f"\n{f.name} : " in doc, f.name
        assert config.validate({f.name: f.default}) if f.default is not None else True
        for flag in spec.flags:
            assert flag.names[0] in helptext, (f.name, flag.names)
    # the options only Python can pass are documented with the rest
    for name in ("structure", "client", "progress", "return_result"):
        assert name in signature and f"\n{name}\n" in doc


def test_a_bad_value_gets_the_same_message_everywhere(tmp_path, capsys):
    message = "bad value 0 for 'workers': expected a positive integer"
    with pytest.raises(OptionError, match=message):
        tilelabel.label_zarr("in.zarr", "out.zarr", workers=0)
    cfg = tmp_path / "run.yaml"
    cfg.write_text("workers: 0\n")
    with pytest.raises(config.ConfigError, match=f"{cfg}: {message}"):
        config.load(cfg)
    assert main(["label", "in.zarr", "out.zarr", "--workers", "0", "-q"]) == 2
    assert message in capsys.readouterr().err


def test_values_are_normalised_as_they_are_checked():
    got = Options(
        input="in.zarr",
        chunks=[64, np.int64(32), "16"],
        connectivity=np.int32(6),
        dtype=np.uint64,
        keep_labels="8GB",
        stats=False,
    )
    assert got.chunks == (64, 32, 16) and type(got.chunks[1]) is int
    assert got.connectivity == 6 and type(got.connectivity) is int
    assert got.dtype == "uint64" and got.keep_labels == 8 * 10**9
    assert options.checked({"gpu_encode": True, "keep_input": False}) == {
        "gpu_encode": True,
        "keep_input": False,
    }
    with pytest.raises(OptionError, match="unknown option 'colour'"):
        options.checked({"colour": "red"})
    with pytest.raises(OptionError, match="give either 'scheduler' or 'cluster'"):
        Options(scheduler="tcp://a:1", cluster={"kind": "local"})


def test_flags_given_are_the_options_given():
    args = build_parser().parse_args(
        ["label", "a.zarr", "-c", "6", "--no-keep-input", "--gpu-encode", "--channel", "1"]
    )
    assert options.given(args) == {
        "input": "a.zarr",
        "connectivity": 6,
        "keep_input": False,
        "gpu_encode": True,
        "channel": 1,
    }
