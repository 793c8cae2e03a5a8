"""
A griffe extension for the API reference: docstring items written the Hugging Face way, as TRL's and ours are,
`name (`int`, *optional*, defaults to `0`): ...`, get their type as Google-style docstrings write it, `name (int):`,
so the reference's type column shows `int` where it showed the raw Markdown. The default has its own column, read from
the signature; a type written as prose (`np.ndarray` of shape `(N,)`, float32) keeps its words without the backticks.
"""

import re
from typing import Any

import griffe


# The sections whose items open with `name (type):` ...
_NAMED_SECTIONS = ("Args", "Arguments", "Parameters", "Attributes", "Other Parameters", "Keyword Args")
# ... and those whose items open with `type:`.
_TYPED_SECTIONS = ("Returns", "Yields", "Raises")
_SECTION = re.compile(rf"^(?P<indent>\s*)(?P<title>{'|'.join(_NAMED_SECTIONS + _TYPED_SECTIONS)}):\s*$")
_NAMED_ITEM = re.compile(r"^(?P<name>\s*[\w*][\w*, ]*?) \((?P<type>[^\n]*?)\):(?P<rest>\s.*|)$")
_TYPED_ITEM = re.compile(r"^(?P<indent>\s*)(?P<type>`[^:\n]*?):(?P<rest>\s.*|)$")


def plain_type(annotation: str) -> str:
    """
    A Hugging Face type as Google style writes it: "`int`, *optional*, defaults to `0`" -> "int", "`KGPSConfig`,
    *optional*" -> "KGPSConfig", "`np.ndarray` of shape `(N,)`, float32" -> "np.ndarray of shape (N,), float32",
    "*optional*" -> "".
    """
    annotation = re.sub(r"(^|,\s*)\*optional\*.*$", "", annotation)
    return annotation.replace("`", "").replace("*", "").strip()


def plain_types(docstring: str) -> str:
    """`docstring` with the type of every item of its sections (`_NAMED_SECTIONS`, `_TYPED_SECTIONS`) made plain."""
    lines = docstring.split("\n")
    section, section_indent, item_indent = None, 0, None
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(line)
        if header:
            section, section_indent, item_indent = header["title"], len(header["indent"]), None
            continue
        if section is None or indent <= section_indent:
            section = None
            continue
        if item_indent is None:
            item_indent = indent
        if indent != item_indent:  # a continuation of the item's description
            continue
        if section in _NAMED_SECTIONS and (item := _NAMED_ITEM.match(line)):
            kind = plain_type(item["type"])
            lines[i] = f"{item['name']}{f' ({kind})' if kind else ''}:{item['rest']}"
        elif section in _TYPED_SECTIONS and (item := _TYPED_ITEM.match(line)):
            lines[i] = f"{item['indent']}{plain_type(item['type'])}:{item['rest']}"
    return "\n".join(lines)


class PlainTypes(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_types(obj.docstring.value)
