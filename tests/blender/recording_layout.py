"""A recording stand-in for Blender's UILayout: the one stand-in the suite allows (issue #12.8).

Blender's own layout needs a window, which the bpy module has none of. This records every call
a panel's draw() makes and checks each against the real thing as it goes, so a typo fails:

- a keyword argument against the real UILayout function's parameters (RNA);
- `prop(owner, "name")` and `prop_search` against the real RNA of `owner`;
- `operator("mod.name")` against `bpy.ops`, and each property set on the returned operator
  properties against that operator's RNA; `operator_menu_enum`'s property must be an enum;
- every icon name against Blender's icon enum; `menu()` against the registered menus;
- attributes set on a layout (alert, enabled, ...) against UILayout's RNA.
"""

from __future__ import annotations

import bpy


class LayoutError(AssertionError):
    """A draw() call that Blender would refuse (or silently draw as nothing)."""


def _function(name: str):
    function = bpy.types.UILayout.bl_rna.functions.get(name)
    if function is None:
        raise LayoutError(f"UILayout has no function '{name}'")
    return function


def _icons() -> set[str]:
    parameter = _function("label").parameters["icon"]
    return {item.identifier for item in parameter.enum_items}


_ICONS: set[str] | None = None


def _check_icon(icon) -> None:
    global _ICONS
    if _ICONS is None:
        _ICONS = _icons()
    if icon not in _ICONS:
        raise LayoutError(f"unknown icon '{icon}'")


def _check_keywords(function_name: str, keywords: dict) -> None:
    parameters = _function(function_name).parameters
    for key, value in keywords.items():
        if key not in parameters:
            raise LayoutError(f"UILayout.{function_name}() has no parameter '{key}'")
        if key == "icon":
            _check_icon(value)


def _check_property(owner, name: str, what: str):
    if owner is None:
        raise LayoutError(f"{what}: owner of '{name}' is None")
    rna = getattr(owner, "bl_rna", None)
    if rna is None:
        raise LayoutError(f"{what}: {owner!r} has no RNA (not a Blender struct)")
    prop = rna.properties.get(name)
    if prop is None:
        raise LayoutError(f"{what}: {rna.identifier} has no property '{name}'")
    return prop


def _operator_rna(idname: str):
    if idname.count(".") != 1:
        raise LayoutError(f"operator id '{idname}' is not 'module.name'")
    module, name = idname.split(".")
    try:
        operator = getattr(getattr(bpy.ops, module), name)
        return operator.get_rna_type()
    except (AttributeError, KeyError):
        raise LayoutError(f"no operator '{idname}'") from None


class RecordedOperator:
    """What `layout.operator()` returns: settable operator properties, checked against its RNA."""

    def __init__(self, idname: str, rna, record: list):
        object.__setattr__(self, "_idname", idname)
        object.__setattr__(self, "_rna", rna)
        object.__setattr__(self, "_record", record)

    def __setattr__(self, name, value):
        if name not in self._rna.properties:
            raise LayoutError(f"operator '{self._idname}' has no property '{name}'")
        self._record.append(("operator_property", self._idname, name, value))

    def __getattr__(self, name):
        if name not in self._rna.properties:
            raise LayoutError(f"operator '{self._idname}' has no property '{name}'")
        return None


class RecordingLayout:
    """Records calls; `calls` is shared by every sub-layout made from it."""

    def __init__(self, calls: list | None = None):
        object.__setattr__(self, "calls", [] if calls is None else calls)

    def __setattr__(self, name, value):
        if name not in bpy.types.UILayout.bl_rna.properties:
            raise LayoutError(f"UILayout has no attribute '{name}'")
        self.calls.append(("set", name, value))

    # sub-layouts
    def _sub(self, kind, keywords):
        _check_keywords(kind, keywords)
        self.calls.append((kind, keywords))
        return RecordingLayout(self.calls)

    def row(self, **keywords):
        return self._sub("row", keywords)

    def column(self, **keywords):
        return self._sub("column", keywords)

    def box(self, **keywords):
        return self._sub("box", keywords)

    def split(self, **keywords):
        return self._sub("split", keywords)

    def column_flow(self, **keywords):
        return self._sub("column_flow", keywords)

    def grid_flow(self, **keywords):
        return self._sub("grid_flow", keywords)

    # items
    def label(self, **keywords):
        _check_keywords("label", keywords)
        self.calls.append(("label", keywords.get("text", ""), keywords.get("icon")))

    def separator(self, **keywords):
        _check_keywords("separator", keywords)

    def prop(self, owner, name, **keywords):
        _check_keywords("prop", keywords)
        prop = _check_property(owner, name, "prop")
        if "index" in keywords and getattr(prop, "array_length", 0) <= keywords["index"]:
            raise LayoutError(f"prop: '{name}' has no index {keywords['index']}")
        self.calls.append(("prop", owner, name, keywords))

    def prop_search(self, owner, name, search_owner, search_name, **keywords):
        _check_keywords("prop_search", keywords)
        _check_property(owner, name, "prop_search")
        _check_property(search_owner, search_name, "prop_search (search)")
        self.calls.append(("prop_search", owner, name, keywords))

    def prop_enum(self, owner, name, value, **keywords):
        _check_keywords("prop_enum", keywords)
        prop = _check_property(owner, name, "prop_enum")
        if value not in {item.identifier for item in prop.enum_items}:
            raise LayoutError(f"prop_enum: '{value}' is not an item of '{name}'")
        self.calls.append(("prop_enum", owner, name, value))

    def operator(self, idname, **keywords):
        _check_keywords("operator", keywords)
        rna = _operator_rna(idname)
        self.calls.append(("operator", idname, keywords))
        return RecordedOperator(idname, rna, self.calls)

    def operator_menu_enum(self, idname, property, **keywords):  # noqa: A002 - Blender's name
        _check_keywords("operator_menu_enum", keywords)
        rna = _operator_rna(idname)
        prop = rna.properties.get(property)
        if prop is None or prop.type != "ENUM":
            raise LayoutError(f"operator '{idname}' has no enum property '{property}'")
        self.calls.append(("operator_menu_enum", idname, property, keywords))
        return RecordedOperator(idname, rna, self.calls)

    def menu(self, menu, **keywords):
        _check_keywords("menu", keywords)
        if getattr(bpy.types, menu, None) is None and bpy.types.Menu.bl_rna_get_subclass_py(menu) is None:
            raise LayoutError(f"no menu '{menu}'")
        self.calls.append(("menu", menu, keywords))

    def progress(self, **keywords):
        _check_keywords("progress", keywords)
        self.calls.append(("progress", keywords))

    def template_list(self, list_type, list_id, owner, name, active_owner, active_name, **keywords):
        _check_keywords("template_list", keywords)
        _check_property(owner, name, "template_list")
        _check_property(active_owner, active_name, "template_list (active)")
        self.calls.append(("template_list", list_type, name))

    def __getattr__(self, name):
        # Any other UILayout function: it must exist; its call is recorded unchecked.
        _function(name)

        def call(*args, **keywords):
            _check_keywords(name, keywords)
            self.calls.append((name, args, keywords))
            return RecordingLayout(self.calls)

        return call

    # what was drawn, for assertions
    def texts(self) -> list[str]:
        out = []
        for call in self.calls:
            if call[0] == "label":
                out.append(call[1])
            elif call[0] in ("operator", "operator_menu_enum"):
                out.append(call[-1].get("text", ""))
            elif call[0] == "prop":
                out.append(call[3].get("text", ""))
        return out

    def operators(self) -> list[str]:
        return [call[1] for call in self.calls if call[0] in ("operator", "operator_menu_enum")]


class _Drawn:
    """Stands in for the panel instance Blender would pass as `self` (only `layout` differs)."""

    def __init__(self, cls, layout):
        self.__dict__["_cls"] = cls
        self.__dict__["layout"] = layout

    def __getattr__(self, name):
        return getattr(self._cls, name)


def draw_panel(cls, context=None) -> RecordingLayout | None:
    """Run `cls.draw` (and `draw_header`) against a recording layout; None when poll says no."""
    context = context or bpy.context
    poll = getattr(cls, "poll", None)
    if poll is not None and not poll(context):
        return None
    layout = RecordingLayout()
    drawn = _Drawn(cls, layout)
    header = getattr(cls, "draw_header", None)
    if header is not None:
        header(drawn, context)
    cls.draw(drawn, context)
    return layout


def draw_node(node, context=None) -> RecordingLayout:
    """A node's draw_buttons (and draw_buttons_ext) against a recording layout."""
    context = context or bpy.context
    layout = RecordingLayout()
    node.draw_buttons(context, layout)
    if hasattr(node, "draw_buttons_ext"):
        node.draw_buttons_ext(context, RecordingLayout(layout.calls))
    return layout
