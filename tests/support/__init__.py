"""Helpers shared by the tests: fake servers, generated inputs, figure layout checks."""
