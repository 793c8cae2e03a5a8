"""
Which train-dataset columns the trainer's reward functions and environments may read. TRL hands every column of a
row to every reward function as a keyword argument, and to an environment's `reset(**row)`; a column one of them
reads may hold the answer, and KGPS never shares by it (a shared part learnt from the answer would predict a
prompt's success from its answer). The evidence, for each reader:

1. the parameters its signature names (`def reward(completions, answer, **kwargs)`);
2. when it takes `**kwargs` (or its signature cannot be read): how its code uses them. A reader whose every use is
   `kwargs["name"]`, `kwargs.get("name"[, default])`, `kwargs.pop(...)` or `"name" in kwargs` (in its own code and in
   the lambdas, comprehensions and inner functions nested in it) reads those names. Any other use may read any column,
   since reading code cannot follow where the name comes from or where `kwargs` goes: a computed name
   (`kwargs[self.column]`, `kwargs[CFG.answer_column]`), `kwargs` passed on (`utils.gold(kwargs)`, `f(**kwargs)` in a
   decorator, `operator.itemgetter("cop")(kwargs)`), code that cannot be read (a builtin, a compiled extension);
3. then every name its code holds: string constants, attribute and global names, and the parameters of what it calls,
   following what it wraps and calls (a decorator's inner function, a `functools.partial`, a callable object's methods
   and the strings it holds, the functions of its own module it calls);
4. and every column whose name says it may hold the answer (`answer`, `solution`, `ground_truth`, `label`, `target`,
   ...).
"""

import dataclasses
import dis
import functools
import inspect
import itertools
import os
import re
import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any


# Words of a column name that say it may hold the answer (`final_answer`, `ground_truth`, `goldLabel`, `test_cases`).
ANSWER_WORDS = frozenset(
    {
        "answer", "answers", "ans", "solution", "solutions", "truth", "gt", "gold", "label", "labels", "target",
        "targets", "reference", "references", "ref", "expected", "correct", "result", "results", "output", "outputs",
        "response", "responses", "completion", "completions", "verification", "test", "tests",
    }
)  # fmt: skip
_METHODS = (types.FunctionType, staticmethod, classmethod, property)
# How far the code is followed from a reader (a decorator's inner function is 1, a helper it calls 2, ...).
_MAX_DEPTH = 4
# Containers (lists, dicts) of strings an object holds are read up to this size: a column name, not a vocabulary.
_MAX_CONTAINER = 64
# The bytecode that loads a local, cell or free variable, and that stores or deletes one: Python 3.10 to 3.13
# (checked), and the names 3.14 adds (`LOAD_FAST_BORROW`); an instruction not listed counts as a use that may read any
# column.
_LOADS = frozenset(
    {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_FAST_LOAD_FAST",
     "LOAD_FAST_BORROW_LOAD_FAST_BORROW", "STORE_FAST_LOAD_FAST"}
)  # fmt: skip
_STORES = frozenset({"STORE_FAST", "STORE_DEREF", "DELETE_FAST", "DELETE_DEREF", "MAKE_CELL", "STORE_FAST_STORE_FAST"})
_CALLS = frozenset({"CALL", "PRECALL", "CALL_METHOD"})
# Builtins through which code reads its own variables without naming them.
_FRAME_READERS = frozenset({"locals", "vars", "eval", "exec"})


def says_answer(column: str) -> bool:
    """Whether a column's name says it may hold the answer: one of its words is in `ANSWER_WORDS`."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", column).lower()
    return not ANSWER_WORDS.isdisjoint(re.findall(r"[a-z0-9]+", words))


@dataclasses.dataclass(frozen=True)
class Reader:
    """
    One reward function or environment, as far as the columns it reads go.

    Attributes:
        name (`str`): how the log names it, e.g. ``"the reward function accuracy_reward"``.
        arguments (`frozenset[str]`): the parameters its signature names.
        any_column (`bool`): it takes `**kwargs`, or its signature cannot be read: it may read any column.
        code_names (`frozenset[str]`): the names its code holds (point 3 above).
        unresolved (`str` or `None`): with `any_column`, how it may read a column its code does not name (point 2
            above), e.g. ``"uses **kwargs other than as kwargs['name'] or kwargs.get('name') (rewards.py, line 12)"``:
            then it may read every column.
    """

    name: str
    arguments: frozenset[str]
    any_column: bool
    code_names: frozenset[str]
    unresolved: str | None = None

    def why(self, column: str) -> str | None:
        """Why this reader may read `column`; `None` when the evidence says it does not."""
        if column in self.arguments:
            return f"{self.name} reads it"
        if not self.any_column:
            return None
        if self.unresolved is not None:
            return f"{self.name} {self.unresolved}, so it may read any column"
        if column in self.code_names:
            return f"{self.name} takes **kwargs and names it in its code"
        if says_answer(column):
            return f"{self.name} takes **kwargs, and the column's name says it may hold the answer"
        return None


@dataclasses.dataclass(frozen=True)
class ColumnReaders:
    """What a trainer's reward functions and environments read (`ColumnReaders.of`)."""

    readers: tuple[Reader, ...] = ()

    @classmethod
    def of(cls, reward_funcs: Sequence[Any] = (), environments: Sequence[Any] = ()) -> "ColumnReaders":
        """
        Args:
            reward_funcs (`Sequence`): the trainer's reward functions (callables; a reward model or a model id is
                given only the completions' text and reads no column).
            environments (`Sequence`): environment instances or classes, whose `reset(**row)` receives the row, or the
                factories that build them.
        """
        readers = [
            _reader(f"the reward function {_name(f)}", f)
            for f in reward_funcs
            if callable(f) and not hasattr(f, "forward")
        ]
        for environment in environments:
            reset = getattr(environment, "reset", None)
            if reset is not None:
                readers.append(_reader(f"the environment {_name(environment)}", reset, environment))
            elif callable(environment):  # a factory: what the environments it builds read is unknown until built
                name = f"the environment factory {_name(environment)}"
                how = "builds environments whose reset(**row) KGPS cannot read before training"
                readers.append(Reader(name, frozenset(), True, _code_names(environment), how))
        return cls(tuple(readers))

    def reasons(self, columns: Sequence[str]) -> dict[str, str]:
        """`{column: why}` for each of `columns` that a reader may read, with the first reader's reason."""
        reasons = {}
        for column in columns:
            why = next((why for reader in self.readers if (why := reader.why(column)) is not None), None)
            if why is not None:
                reasons[column] = why
        return reasons

    def names_column(self, column: str) -> str | None:
        """
        Who reads `column` by its name, as a clause (``"the reward function accuracy_reward reads"``): the first
        reader whose signature names it, or that takes `**kwargs` and whose code names it; `None` when none does. The
        weaker evidence `reasons` also weighs (a reader that may read any column, a name that says answer) is left out.
        """
        for reader in self.readers:
            if column in reader.arguments:
                return f"{reader.name} reads"
            if column in reader.code_names:
                return f"{reader.name} names in its code"
        return None


def _name(obj: Any) -> str:
    if isinstance(obj, type):
        return obj.__name__
    return getattr(obj, "__name__", None) or type(obj).__name__


def _reader(name: str, func: Any, *more: Any) -> Reader:
    """`func`'s `Reader`; `more` are further objects whose code counts as `func`'s (an environment's class)."""
    try:
        parameters = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        parameters = None
    if parameters is None:
        arguments, any_column = frozenset(), True
    else:
        arguments = frozenset(p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        any_column = any(p.kind == p.VAR_KEYWORD for p in parameters)
    code_names = _code_names(func, *more) if any_column else frozenset()
    return Reader(name, arguments, any_column, code_names, _unresolved(func) if any_column else None)


def _unresolved(reader: Any) -> str | None:
    """
    How `reader` may read a column its code does not name (point 2 above): where its code uses its `**kwargs` other
    than by a constant name, or that its code cannot be read; `None` when every use reads a constant name, or it takes
    no `**kwargs`.
    """
    func = _python_function(reader)
    if func is None:
        return "runs code KGPS cannot read"
    code = func.__code__
    if not code.co_flags & inspect.CO_VARKEYWORDS:
        return None
    kwargs = code.co_varnames[code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS)]
    for inner in _code_objects(code):
        # nested code (a lambda, a comprehension, an inner function) reaches `kwargs` as a free variable
        line = _unresolved_use(inner, kwargs) if inner is code or kwargs in inner.co_freevars else None
        if line is not None:
            where = f"{os.path.basename(code.co_filename)}, line {line}"
            return f"uses **kwargs other than as kwargs['name'] or kwargs.get('name') ({where})"
    return None


def _python_function(reader: Any) -> types.FunctionType | None:
    """The Python function a call to `reader` runs: itself, a method's or a partial's function, a callable object's
    `__call__`; `None` when that is not Python code (a builtin, a compiled extension)."""
    for _ in range(_MAX_DEPTH + 1):
        if isinstance(reader, types.FunctionType):
            return reader
        if isinstance(reader, (types.MethodType, staticmethod, classmethod)):
            reader = reader.__func__
        elif isinstance(reader, functools.partial):
            reader = reader.func
        elif isinstance(reader, type):
            return None
        else:  # a callable object: its class's `__call__`, if it is Python code
            reader = inspect.getattr_static(type(reader), "__call__", None)
            if not isinstance(reader, (types.FunctionType, staticmethod, classmethod)):
                return None
    return None


def _unresolved_use(code: types.CodeType, kwargs: str) -> int | None:
    """The line of the first use `code` makes of its variable `kwargs` that does not read a constant name from it (or
    of a builtin that reads variables unnamed); `None` when there is none."""
    instructions = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "EXTENDED_ARG", "NOP")]
    line = code.co_firstlineno
    for at, instruction in enumerate(instructions):
        line = _line(instruction, line)
        op = instruction.opname
        if op in ("LOAD_GLOBAL", "LOAD_NAME") and instruction.argval in _FRAME_READERS:
            return line
        if not any(kind in op for kind in ("FAST", "DEREF", "CLOSURE", "CELL")):
            continue  # not a variable: an attribute or a global of the same name
        names = instruction.argval if isinstance(instruction.argval, tuple) else (instruction.argval,)
        loaded = names[1:] if op == "STORE_FAST_LOAD_FAST" else names if op in _LOADS else ()
        if kwargs not in names or (op in _STORES or op == "STORE_FAST_LOAD_FAST") and kwargs not in loaded:
            continue
        after = instructions[at + 1 :]
        cell = kwargs in code.co_cellvars + code.co_freevars  # a closure may hand on the enclosing one
        if kwargs in loaded[-1:] and kwargs not in loaded[:-1] and _reads_a_name(after):
            continue
        if kwargs in loaded and cell and _builds_closure(after, kwargs):
            continue
        return line
    return None


def _line(instruction: dis.Instruction, previous: int) -> int:
    positions = getattr(instruction, "positions", None)  # Python 3.11 and later
    if positions is not None:
        return positions.lineno or previous
    return instruction.starts_line or previous


def _reads_a_name(after: list[dis.Instruction]) -> bool:
    """Whether the instructions `after` a load of `kwargs` read one constant name of it: `kwargs["name"]`,
    `kwargs.get("name")` or `.pop`, with one default at most, or test `... in kwargs`."""
    op = [i.opname for i in after[:5]] + [""] * 5
    if op[0] == "CONTAINS_OP":
        return True
    if op[0] == "LOAD_CONST" and isinstance(after[0].argval, str):  # kwargs["name"]
        return op[1] == "BINARY_SUBSCR" or (op[1] == "BINARY_OP" and after[1].argrepr == "[]")
    if op[0] not in ("LOAD_ATTR", "LOAD_METHOD") or after[0].argval not in ("get", "pop"):
        return False
    if not (op[1] == "LOAD_CONST" and isinstance(after[1].argval, str)):
        return False
    if op[2] in _CALLS:
        return after[2].arg == 1
    return _pushes_one(after[2]) and op[3] in _CALLS and after[3].arg == 2


def _pushes_one(instruction: dis.Instruction) -> bool:
    """Whether `instruction` pushes one value and reads no variable but the one it names: a default's."""
    op = instruction.opname
    if op in ("BUILD_LIST", "BUILD_MAP", "BUILD_SET", "BUILD_TUPLE"):
        return instruction.arg == 0
    if op in ("LOAD_GLOBAL", "LOAD_NAME"):
        return not instruction.argrepr.startswith("NULL")
    return op in ("LOAD_CONST", "LOAD_SMALL_INT", "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW", "LOAD_DEREF")


def _builds_closure(after: list[dis.Instruction], kwargs: str) -> bool:
    """Whether the instructions `after` a load of the cell `kwargs` put it in the closure of a nested function, whose
    code `_unresolved` reads: more cells loaded, the tuple of them built, then the function's code."""
    rest = list(itertools.dropwhile(lambda i: i.opname in _LOADS, after))[:2]
    if len(rest) < 2 or rest[0].opname != "BUILD_TUPLE" or rest[1].opname != "LOAD_CONST":
        return False
    nested = rest[1].argval
    return (
        isinstance(nested, types.CodeType) and kwargs in nested.co_freevars and len(nested.co_freevars) == rest[0].arg
    )


def _code_names(*roots: Any) -> frozenset[str]:
    """Every name the code of `roots` holds, following what it wraps and calls up to `_MAX_DEPTH` (point 2)."""
    names: set[str] = set()
    seen: set[int] = set()
    todo = [(root, 0) for root in roots]
    while todo:
        obj, depth = todo.pop()
        if id(obj) in seen or depth > _MAX_DEPTH or (depth and not _followed(obj)):
            continue
        seen.add(id(obj))
        for part in _parts(obj):
            if isinstance(part, str):
                names.add(part)
            else:
                todo.append((part, depth + 1))
    return frozenset(names)


def _followed(obj: Any) -> bool:
    """
    Whether the code of `obj`, reached from a reader, is read: a wrapper's contents always, a function, class or
    object only when it is the user's code (neither the standard library nor an installed package), so that a
    tokenizer in a closure or a library's helper does not lend its strings.
    """
    if isinstance(obj, (functools.partial, types.MethodType, staticmethod, classmethod, property)):
        return True
    module_name = getattr(obj, "__module__", None) if isinstance(obj, (type, types.FunctionType)) else None
    module_name = module_name or type(obj).__module__
    top = module_name.partition(".")[0]
    if top in sys.stdlib_module_names or top == "builtins":
        return False
    path = getattr(sys.modules.get(module_name), "__file__", None) or ""
    return not {"site-packages", "dist-packages"} & set(Path(path).parts)


def _parts(obj: Any) -> Iterator[Any]:
    """The names (`str`) `obj`'s code holds directly, and the objects whose code it reaches."""
    if isinstance(obj, functools.partial):
        yield obj.func
        yield from _strings(obj.args)
        yield from _strings(obj.keywords)
    elif isinstance(obj, types.MethodType):
        yield obj.__func__
        yield obj.__self__
    elif isinstance(obj, (staticmethod, classmethod)):
        yield obj.__func__
    elif isinstance(obj, property):
        yield from (f for f in (obj.fget, obj.fset) if f is not None)
    elif isinstance(obj, types.FunctionType):
        yield from _function_parts(obj)
    elif isinstance(obj, type):
        for cls in obj.__mro__:
            if cls.__module__ != "builtins":
                yield from (v for v in vars(cls).values() if isinstance(v, _METHODS))
    elif not isinstance(obj, (types.BuiltinFunctionType, types.ModuleType)) and type(obj).__module__ != "builtins":
        # A callable object or an environment: its class's code, and the names it holds (`self.column = "answer"`).
        yield type(obj)
        yield from _strings(vars(obj) if hasattr(obj, "__dict__") else {})


def _function_parts(func: types.FunctionType) -> Iterator[Any]:
    code = func.__code__
    yield from code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]  # what a wrapped function takes
    for inner in _code_objects(code):
        yield from (const for const in inner.co_consts if isinstance(const, str))
        for global_name in inner.co_names:
            yield global_name
            value = func.__globals__.get(global_name)
            if isinstance(value, (types.FunctionType, type)) and value.__module__ == func.__module__:
                yield value  # a helper of the reader's own module
            else:
                yield from (v for v in _strings(value) if isinstance(v, str))
    for cell in func.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        yield from ([value] if callable(value) else _strings(value))
    yield from _strings(func.__defaults__ or ())
    yield from _strings(func.__kwdefaults__ or {})
    if hasattr(func, "__wrapped__"):
        yield func.__wrapped__


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    """`code` and the code nested in it (comprehensions, inner functions, lambdas)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _strings(value: Any) -> Iterator[Any]:
    """The strings in `value` (a string, or a small list, tuple, set or dict of them), and the functions it holds."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict) and len(value) <= _MAX_CONTAINER:
        yield from (v for item in value.items() for v in item if isinstance(v, str) or _is_code(v))
    elif isinstance(value, (list, tuple, set, frozenset)) and len(value) <= _MAX_CONTAINER:
        yield from (v for v in value if isinstance(v, str) or _is_code(v))
    elif _is_code(value):
        yield value


def _is_code(value: Any) -> bool:
    return isinstance(value, (types.FunctionType, types.MethodType, functools.partial))
