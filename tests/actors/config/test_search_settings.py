"""`[settings.search]`: semantic on or off, learning from use on or off, and the field
weights, layered like the rest."""

from __future__ import annotations

import pytest
from config_world import World

from assern.actors.config.spec import ConfigError, SearchSettings


def test_defaults_and_field_by_field_layering(world: World) -> None:
    assert world.resolve().settings.search == SearchSettings()
    world.global_config('[settings.search]\nsemantic = "off"\nfields = { name = 4, server = 0 }\n')
    world.write("repo/.assern/config.toml", "[settings.search]\nfields = { description = 1.5 }\n")
    search = world.resolve(cwd="repo").settings.search
    assert search == SearchSettings(semantic="off", name=4.0, server=0.0, description=1.5)
    assert search.weights == (4.0, 1.5, 0.8, 0.0, 0.2)


def test_learning_is_on_unless_a_layer_turns_it_off(world: World) -> None:
    assert world.resolve().settings.search.learn == "on"
    world.global_config('[settings.search]\nlearn = "off"\n')
    assert world.resolve().settings.search.learn == "off"
    world.write("repo/.assern/config.toml", '[settings.search]\nlearn = "on"\n')
    assert world.resolve(cwd="repo").settings.search.learn == "on"


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('semantic = "on"', "settings.search.semantic"),
        ("learn = false", "expected one of 'on', 'off', got false @ settings.search.learn"),
        ("fields = { name = -1 }", "expected a weight >= 0, got -1 @ settings.search.fields.name"),
        ("fields = { title = 2 }", "unknown key 'title' @ settings.search.fields"),
    ],
)
def test_bad_search_settings_name_the_key(world: World, table: str, problem: str) -> None:
    world.global_config(f"[settings.search]\n{table}\n")
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert any(problem in line for line in caught.value.problems), caught.value.problems
