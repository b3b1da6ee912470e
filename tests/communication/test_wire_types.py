"""The wire codec's registration seam: a type brings its own codec (``register_type``), and the
progress layer's ``Location`` travels through it, registered by the dataflow layer."""

from __future__ import annotations

import struct
from typing import NamedTuple

import pytest

import timelypy.dataflow  # noqa: F401  (registers Location with the codec)
from timelypy.communication import wire
from timelypy.communication.wire import decode, encode, register_type
from timelypy.dataflow import LOCATION_WIRE_CODE
from timelypy.order import Product
from timelypy.progress.reachability import Location


class Cell(NamedTuple):
    row: int
    col: int


_CELL = struct.Struct("<ii")


def test_location_travels_as_itself_under_its_code():
    updates = [((Location(3, 1, True), Product(2, 5)), -1), ((Location(0, 0, False), 7), 2)]
    back = decode(encode(updates))
    assert back == tuple(tuple(u) for u in updates)
    assert all(type(u[0][0]) is Location for u in back)
    packed = encode(Location(3, 1, True))
    assert packed[0] == 0xC7 and packed[2] == LOCATION_WIRE_CODE  # ext 8 with a 17-byte payload
    assert packed[1] == 17


def test_a_value_the_codec_refuses_travels_pickled():
    big = Location(2**70, 1, False)
    assert type(decode(encode(big))) is Location and decode(encode(big)) == big


def test_a_registered_type_round_trips_and_codes_are_checked():
    register_type(Cell, 42, lambda c: _CELL.pack(*c), lambda b: Cell(*_CELL.unpack(b)))
    register_type(Cell, 42, lambda c: _CELL.pack(*c), lambda b: Cell(*_CELL.unpack(b)))
    back = decode(encode([Cell(1, 2), (Cell(-3, 4), {Cell(5, 6)})]))
    assert back == (Cell(1, 2), (Cell(-3, 4), {Cell(5, 6)}))
    assert type(back[0]) is Cell
    assert type(decode(encode(Cell(2**40, 0)))) is Cell  # refused by struct: pickled
    with pytest.raises(ValueError, match="already registered as code 42"):
        register_type(Cell, 43, repr, eval)
    with pytest.raises(ValueError, match="code 42 is taken"):
        register_type(complex, 42, repr, eval)
    with pytest.raises(ValueError, match="built in"):
        register_type(complex, wire.EXT_PICKLE, repr, eval)
    with pytest.raises(ValueError, match="not 0..127"):
        register_type(complex, 200, repr, eval)
