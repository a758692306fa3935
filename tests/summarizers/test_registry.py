"""Summarizers by name: the registry the command line, sweeps and the study share."""

from __future__ import annotations

import pytest

from pimem.errors import ConfigurationError
from pimem.sessions.samples import load_samples
from pimem.summarizers.baselines import FactDumpSummarizer, HeadTruncationSummarizer
from pimem.summarizers.extractive import ExtractiveSummarizer
from pimem.summarizers.recorded import RecordedSummarizer
from pimem.summarizers.registry import (
    SUMMARIZER_NAMES,
    default_summarizer,
    get_summarizer,
    register_summarizer,
    summarizer_names,
)


def test_names_start_with_the_offline_default() -> None:
    names = summarizer_names()
    assert names[0] == "extractive" and {"recorded", "env", "openai", "local", "fact-dump"} <= set(names)
    assert set(SUMMARIZER_NAMES) == set(names) - {"openai", "local"}  # a sweep grid names no model
    assert isinstance(default_summarizer(), ExtractiveSummarizer)


def test_names_build_their_summarizers() -> None:
    session = next(iter(load_samples().values()))
    assert isinstance(get_summarizer("extractive"), ExtractiveSummarizer)
    assert isinstance(get_summarizer("fact-dump"), FactDumpSummarizer)
    assert isinstance(get_summarizer("head-truncation"), HeadTruncationSummarizer)
    assert isinstance(get_summarizer("recorded", session), RecordedSummarizer)


def test_what_a_name_lacks_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="unknown summarizer 'gpt-9'; known: extractive"):
        get_summarizer("gpt-9")
    with pytest.raises(ConfigurationError, match="needs the session"):
        get_summarizer("recorded")
    with pytest.raises(ConfigurationError, match="needs a model"):
        get_summarizer("openai")


def test_a_taken_name_cannot_be_registered_again() -> None:
    with pytest.raises(ConfigurationError, match="already registered"):
        register_summarizer("extractive", lambda **_: ExtractiveSummarizer())
