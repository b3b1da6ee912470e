"""Tests of the Datalog front-end: language, compiler, sessions, command line."""
