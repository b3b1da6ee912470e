"""The from-scratch oracles the engine is checked against: plain, obviously correct, slow."""
