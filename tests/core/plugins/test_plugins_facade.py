"""The typed plugin facade (issue 14, point 6): hooks are called through
``memors_core.plugins.manager.Plugins`` only, and an implementation of any
hook that raises or answers wrongly is isolated there and named, while the
other plugins' answers still count."""

from __future__ import annotations

import re

import attrs
import pytest
from structlog.testing import capture_logs

from memors_core import PluginError, hookimpl
from memors_core.domain.model import CheckResult, Finding
from memors_core.plugins.kinds import Candidate, Kind, fingerprint
from memors_core.plugins.manager import BUILTIN_PLUGINS, build_plugin_manager
from memors_core.testing import temporary_memory
from memors_core.wire import to_json
from paths import ROOT

SRC = ROOT / "src"


def test_no_module_outside_the_plugins_package_calls_a_hook_itself():
    # ``pm.hook.memors_x(...)`` anywhere else would bypass the isolation.
    plugins = SRC / "memors_core" / "plugins"
    spelt = [
        f"{path.relative_to(SRC)}:{number}"
        for path in SRC.rglob("*.py")
        if plugins not in path.parents
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\.hook\b", line)
    ]
    assert spelt == []


def test_the_built_in_plugins_are_the_declared_list():
    pm = build_plugin_manager(entrypoints=False)
    for name, module in BUILTIN_PLUGINS:
        assert pm.get_plugin(name).__name__ == module


# --- a raising implementation of each hook ------------------------------------------


@attrs.frozen
class NoteResolution:
    text: str


class NoteKind(Kind):
    name = "note"
    description = "write a note"
    resolution = NoteResolution
    hint = "text"

    def scan(self, ctx):
        yield Candidate("only", fingerprint("only"), lambda: {"note": "write one"})

    def apply(self, ctx, item, resolution):
        return None


class Note:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(NoteKind())


class Raising:
    """Every hook but kind registration, each raising."""

    @hookimpl
    def memors_extract_entities(self, text):
        raise RuntimeError("extractor down")

    @hookimpl
    def memors_check_submission(self, item):
        raise ValueError("cannot judge")

    @hookimpl
    def memors_lint_rules(self, context):
        raise KeyError("no such rule")


class Working:
    @hookimpl
    def memors_extract_entities(self, text):
        return ["Zebra"]

    @hookimpl
    def memors_check_submission(self, item):
        return {"looks-fine": CheckResult(passed=True)}

    @hookimpl
    def memors_lint_rules(self, context):
        return [Finding("always", "memo://namespace/default", "a rule that always reports")]


def _memory():
    plugins = [("note", Note()), ("raising", Raising()), ("working", Working())]
    return temporary_memory(plugins=plugins, entrypoints=False)


def test_an_extractor_that_raises_is_logged_by_name_and_the_others_still_count():
    with _memory() as memory, capture_logs() as logs:
        r = memory.remember("A passage about [[Raft]].")
        assert {e.name for e in memory.entities().entities} == {"Raft", "Zebra"}
        assert len(r.entities) == 2
    [failed] = [e for e in logs if e["event"] == "plugin_failed"]
    assert failed["plugin"] == "raising" and failed["hook"] == "memors_extract_entities"
    assert failed["error"] == "extractor down"


def test_a_check_that_raises_is_a_flagged_check_named_after_its_plugin():
    with _memory() as memory:
        [item] = to_json(memory.compact(["note"]))["items"]
        report = to_json(memory.submit(item["id"], {"text": "hello"}))
        assert report["stored"] is False
        assert report["checks"]["raising"] == {
            "passed": False,
            "flagged": [{"error": "ValueError: cannot judge"}],
        }
        assert report["checks"]["looks-fine"] == {"passed": True, "flagged": []}
        assert to_json(memory.submit(item["id"], {"text": "hello"}, force=True))["stored"]


def test_a_lint_rule_that_raises_is_a_plugin_error_finding_and_the_others_report():
    with _memory() as memory:
        memory.remember("A passage.")
        findings = {(f.rule, f.address): f.message for f in memory.lint().findings}
    assert findings[("plugin-error", "plugin:raising")] == (
        "lint rules of plugin 'raising' failed: KeyError: 'no such rule'"
    )
    assert ("always", "memo://namespace/default") in findings


def test_a_kind_registration_that_raises_names_its_plugin():
    class Raises:
        @hookimpl
        def memors_register_kinds(self, registry):
            raise RuntimeError("no kinds today")

    with (
        pytest.raises(PluginError, match=r"plugin 'raises' failed to register its kinds"),
        temporary_memory(plugins=[("raises", Raises())], entrypoints=False),
    ):
        pass


# --- answers of the wrong shape ------------------------------------------------------


class OddCheck:
    @hookimpl
    def memors_check_submission(self):
        return {"odd": "yes it passed"}  # not a CheckResult


def test_a_check_answering_something_else_than_check_results_flags_naming_it():
    with temporary_memory(plugins=[("note", Note()), ("odd", OddCheck())]) as memory:
        [item] = to_json(memory.compact(["note"]))["items"]
        report = to_json(memory.submit(item["id"], {"text": "hello"}))
    assert report["stored"] is False
    assert report["checks"]["odd"] == {
        "passed": False,
        "flagged": [{"error": "returned str for check 'odd', not a CheckResult"}],
    }


def test_a_plugin_registered_later_brings_its_kinds():
    pm = build_plugin_manager(entrypoints=False)
    assert "note" not in pm.kinds
    pm.register(Note(), name="note")
    assert "note" in pm.kinds


def test_registering_a_plugin_with_an_unknown_hook_is_refused_naming_it():
    class Misspelt:
        @hookimpl
        def memors_lint_rule(self, context):  # no such hook
            return []

    pm = build_plugin_manager(entrypoints=False)
    with pytest.raises(PluginError, match=r"plugin 'misspelt' is invalid: unknown hook"):
        pm.register(Misspelt(), name="misspelt")
    assert pm.get_plugin("misspelt") is None
