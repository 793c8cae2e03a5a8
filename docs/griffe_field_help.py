"""
A griffe extension for the API reference: a dataclass field written TRL's way, `name: type = field(default=...,
metadata={"help": "..."})`, gets its help text as its docstring and its default as its value, so the reference lists
every field of `KGPSConfig` with what it does, as `--help` does.
"""

import ast
import re
from typing import Any

import griffe


class FieldHelp(griffe.Extension):
    def on_attribute_instance(self, *, node: Any, attr: griffe.Attribute, **kwargs: Any) -> None:
        call = getattr(node, "value", None)
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "field"):
            return
        keywords = {keyword.arg: keyword.value for keyword in call.keywords}
        metadata = keywords.get("metadata")
        if isinstance(metadata, ast.Dict):
            for key, value in zip(metadata.keys, metadata.values):
                if isinstance(key, ast.Constant) and key.value == "help" and isinstance(value, ast.Constant):
                    # The help is plain text (`--help` prints it): escape what Markdown would read as markup.
                    text = re.sub(r"([\\`*_\[\]<>])", r"\\\1", value.value)
                    attr.docstring = griffe.Docstring(text, parent=attr)
        if "default" in keywords:
            attr.value = ast.unparse(keywords["default"])
        elif "default_factory" in keywords:
            attr.value = f"{ast.unparse(keywords['default_factory'])}()"
