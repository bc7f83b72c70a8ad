"""The evaluator's paths where a test is undecided: what an early return leaves, and what a
comparison with a value not known decides (nothing).

Seen on 0.5.23 with `--kv-cache-dtype $D` (a variable the launch sets when it runs):
`handle_nvfp4_prefill_kv_dequant_dtype` returns early `if cfg.kv_cache_dtype != "nvfp4"` and
otherwise writes `decode_attention_backend="trtllm_mha"`. The write of the path that did not
return was kept as if every path made it, and `speculative_hook.py:1178`'s "trtllm_mha backend
only supports topk = 1" was a definite refusal of a launch that never asks for NVFP4.
"""

from __future__ import annotations

from pathlib import Path

from eaglebug.checks.pyeval.budget import Budget
from eaglebug.checks.pyeval.values import OneOf, PartialDict, Top, truth
from tests.test_pyeval import machine, run

RESOLVE = """
class Args:
    def __init__(self, dtype):
        self.dtype = dtype
        self.backend = None

def pick(args):
    if args.dtype != "nvfp4":
        return
    args.backend = "trtllm_mha"

def resolve(dtype, topk):
    args = Args(dtype)
    pick(args)
    if args.backend == "trtllm_mha" and topk > 1:
        raise ValueError("trtllm_mha backend only supports topk = 1")
    return args.backend
"""


def test_an_early_return_keeps_the_state_it_returned_with(tmp_path: Path) -> None:
    m = machine(tmp_path, {"a.py": RESOLVE})
    unknown = run(m, "a", "resolve", Top("--kv-cache-dtype $D"), 4)
    assert isinstance(unknown.value, OneOf) and set(unknown.value.values) == {None, "trtllm_mha"}
    assert [(r.message, r.definite) for r in unknown.raised] == [
        ("trtllm_mha backend only supports topk = 1", False)
    ]
    # Both sides, where the dtype is known: decided each way.
    nvfp4 = run(machine(tmp_path / "b", {"a.py": RESOLVE}), "a", "resolve", "nvfp4", 4)
    assert [(r.message, r.definite) for r in nvfp4.raised] == [
        ("trtllm_mha backend only supports topk = 1", True)
    ]
    auto = run(machine(tmp_path / "c", {"a.py": RESOLVE}), "a", "resolve", "auto", 4)
    assert (auto.value, auto.raised) == (None, ())


def test_a_path_that_raised_is_not_one_the_caller_goes_on_from(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        class Args:
            def __init__(self):
                self.size = 1

        def grow(args, flag, other):
            if flag:
                args.size = 2
                raise ValueError("refused")
            if other:
                args.size = 3
                return
            args.size = 4

        def f(flag, other):
            args = Args()
            grow(args, flag, other)
            return args.size
    """
        },
    )
    # The raising path's 2 is not a state the caller continues from; 3 and 4 are.
    value = run(m, "a", "f", Top("flag"), Top("other")).value
    assert isinstance(value, OneOf) and set(value.values) == {3, 4}
    # Every path returns early: the caller goes on from theirs, merged.
    ended = machine(
        tmp_path / "b",
        {
            "a.py": """
        class Args:
            def __init__(self):
                self.size = 1

        def grow(args, flag):
            if flag:
                args.size = 2
                return
            else:
                args.size = 5
                return

        def f(flag):
            args = Args()
            grow(args, flag)
            return args.size
    """
        },
    )
    value = run(ended, "a", "f", Top("flag")).value
    assert isinstance(value, OneOf) and set(value.values) == {2, 5}


def test_in_and_equality_with_an_item_not_known_decide_nothing(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(prefill, decode):
            return (
                "trtllm_mha" in (prefill, decode),
                (prefill, decode) == ("fa3", "trtllm_mha"),
                "fa4" in (prefill, decode),
                (prefill, decode) == ("fa3", "fa4"),
            )
    """
        },
    )
    either = OneOf(("fa3", "trtllm_mha"))
    same_dict = machine(
        tmp_path / "d",
        {
            "a.py": "def f(x):\n    return {'k': x} == {'k': 'a'}, {'k': x} == {'j': 'a'}, {x} == {'a'}\n"
        },
    )
    keyed, other_keys, as_set = run(same_dict, "a", "f", OneOf(("a", "b"))).value
    assert truth(keyed) is None and other_keys is False and truth(as_set) is None
    # The server's environment: only some keys are known, so no dict is known to equal it.
    environ = PartialDict({"A": "a"}, frozenset({"B"}))
    assert truth(run(same_dict, "a", "f", environ).value[0]) is None  # {'k': env} == {'k': 'a'}
    inside, equal, absent, unequal = run(m, "a", "f", "fa3", either).value
    assert truth(inside) is None and truth(equal) is None
    assert (absent, unequal) == (False, False)  # false for every value it may have
    # An item known to match decides it, whatever the others are.
    found, _, _, _ = run(m, "a", "f", "trtllm_mha", Top("decode")).value
    assert found is True
    missing, _, _, _ = run(m, "a", "f", "fa3", Top("decode")).value
    assert isinstance(missing, Top)


def test_a_finally_runs_on_the_way_out_of_a_return(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        class A:
            def __init__(self):
                self.x = 0

        def g(a, u):
            try:
                if u:
                    return
                a.x = 2
            finally:
                a.x = 1

        def h(a):
            try:
                return 1
            finally:
                a.x = 3

        def f(u):
            a = A()
            g(a, u)
            b = A()
            h(b)
            return a.x, b.x
    """
        },
    )
    assert run(m, "a", "f", Top("u")).value == (1, 3)


MANY_RETURNS = """
class A:
    def __init__(self):
        self.x = 0

def pick(a, u):
{body}
    a.x = -1

def f(u):
    a = A()
    pick(a, u)
    return a.x
"""


def test_many_early_returns_keep_every_state_and_stay_within_the_budget(tmp_path: Path) -> None:
    body = "\n".join(f"    a.x = {i}\n    if u == {i}:\n        return" for i in range(12))
    m = machine(tmp_path, {"a.py": MANY_RETURNS.format(body=body)})
    value = run(m, "a", "f", Top("u")).value
    assert isinstance(value, OneOf) and set(value.values) == {*range(12), -1}
    # Merging walks each heap: it counts against the run's steps, so a tree of thousands of
    # early returns is cut short and said incomplete, never run without bound.
    many = "\n".join(f"    a.x = {i}\n    if u == {i}:\n        return" for i in range(400))
    tight = machine(
        tmp_path / "b", {"a.py": MANY_RETURNS.format(body=many)}, budget=Budget(steps=3000)
    )
    assert tight.budget.steps == 3000
    result = run(tight, "a", "f", Top("u"))
    assert result.incomplete is not None and "steps" in result.incomplete


def test_a_dict_or_list_changed_on_one_path_is_not_changed_on_the_other(tmp_path: Path) -> None:
    """0.5.23's `serving_hook.py`: `if renamed.get("prefill_attention_backend") ==
    "cutedsl_mla": renamed[...] = "trtllm_mla"`, the backend unknown (a launch's `$X`): the
    other path keeps the dict as it was, and after the branch the value is one of the two."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        def rename(renamed):
            if renamed.get("backend") == "cutedsl_mla":
                renamed["backend"] = "trtllm_mla"
                renamed["extra"] = 1

        def f(backend, u):
            renamed = {"backend": backend}
            rename(renamed)
            seen = []
            if u:
                seen.append(1)
            layers = [0, 0]
            if u:
                layers[1] = 2
            return renamed["backend"], renamed.get("extra"), seen, layers

        def early(d, u):
            if u:
                d["k"] = 1
                return
            d["j"] = 2

        def g(u):
            d = {}
            early(d, u)
            return d.get("k"), d.get("j")
    """
        },
    )
    backend, extra, seen, layers = run(m, "a", "f", Top("$X"), Top("u")).value
    assert isinstance(backend, Top) and isinstance(extra, Top)  # `$X` itself, or trtllm_mla
    assert run(m, "a", "f", "fa3", False).value[:2] == ("fa3", None)
    assert run(m, "a", "f", "cutedsl_mla", False).value[:2] == ("trtllm_mla", 1)
    assert isinstance(seen, Top)  # an append on one path: its length is not known after
    assert layers[0] == 0 and isinstance(layers[1], OneOf) and set(layers[1].values) == {0, 2}
    # A path that returns early keeps what it changed for the caller: either key may be set.
    k, j = run(m, "a", "g", Top("u")).value
    assert isinstance(k, (Top, OneOf)) and isinstance(j, (Top, OneOf))


def test_what_follows_a_nested_early_return_is_not_definite(tmp_path: Path) -> None:
    """`if a: if b: return` and a raise after: the raise happens only where not (a and b)."""
    source = {
        "a.py": """
        def f(a, b):
            if a:
                if b:
                    return 1
            raise ValueError("after")
    """
    }
    unknown = run(machine(tmp_path, source), "a", "f", Top("a"), Top("b"))
    assert [(r.message, r.definite) for r in unknown.raised] == [("after", False)]
    decided = run(machine(tmp_path / "b", source), "a", "f", True, False)
    assert [(r.message, r.definite) for r in decided.raised] == [("after", True)]
    returned = run(machine(tmp_path / "c", source), "a", "f", True, True)
    assert (returned.value, returned.raised) == (1, ())
    # Decided outside, undecided inside: the same.
    half = run(machine(tmp_path / "d", source), "a", "f", True, Top("b"))
    assert [(r.message, r.definite) for r in half.raised] == [("after", False)]


def test_a_break_through_a_finally_runs_it_and_leaves_no_finally_behind(tmp_path: Path) -> None:
    """A `break` out of a `try/finally` in a loop runs the `finally` (Python does), and a later
    return under an undecided test does not run it again."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        class A:
            def __init__(self):
                self.n = 0

        def f(u):
            a = A()
            for i in [1, 2]:
                try:
                    break
                finally:
                    a.n = a.n + 1
            if u:
                return a.n
            return a.n * 10
    """
        },
    )
    value = run(m, "a", "f", Top("u")).value
    assert isinstance(value, OneOf) and set(value.values) == {1, 10}


CHOSEN = """
class Args:
    def __init__(self):
        self.backend = None
        self.page = None

def early(device):
    if device == "npu":
        return "ascend"
    return "flashinfer"

def resolve(device, other):
    args = Args()
    if device == "npu":
        args.backend = "ascend"
    else:
        args.backend = early(device)
    args.page = 128 if args.backend == "ascend" else 1
    mode = "x" if other else "y"
    return args.backend, args.page, early(device), mode
"""


def test_a_choice_between_paths_names_what_chose_it(tmp_path: Path) -> None:
    """`--device $D`: the backend is ascend or flashinfer as the device goes, and the page
    size as the backend goes, so as the device goes too. A finding that rests on either can
    name `--device`, as one on an unknown names what it was read from (`Top.reads`)."""
    device = Top("--device $D: set when the launch runs", frozenset({"device"}))
    other = Top("something else", frozenset({"other"}))
    found = run(machine(tmp_path, {"a.py": CHOSEN}), "a", "resolve", device, other)
    backend, page, returned, mode = found.value
    assert isinstance(backend, OneOf) and set(backend.values) == {"ascend", "flashinfer"}
    assert isinstance(page, OneOf) and set(page.values) == {128, 1}
    assert isinstance(returned, OneOf) and set(returned.values) == {"ascend", "flashinfer"}
    assert backend.reads == page.reads == returned.reads == {"device"}
    assert isinstance(mode, OneOf) and mode.reads == {"other"}
    # Known, nothing to choose: plain values.
    npu = run(machine(tmp_path / "b", {"a.py": CHOSEN}), "a", "resolve", "npu", True)
    assert npu.value == ("ascend", 128, "ascend", "x")


def test_a_list_one_path_added_to_is_not_known_after(tmp_path: Path) -> None:
    """`if x: seen.append("a")` with x undecided: whether "a" is in `seen` is not known after,
    so a raise under `if "a" in seen` is not definite (it was: the list kept the item)."""
    source = """
class Args:
    def __init__(self):
        self.names = []

def f(x, y):
    seen = []
    args = Args()
    if x:
        seen.append("a")
        args.names.append("b")
    if y:
        args.names[:0] = []
    if "a" in seen:
        raise ValueError("seen")
    if "b" in args.names:
        raise ValueError("named")
    return seen
"""
    x = Top("--device $D: set when the launch runs", frozenset({"device"}))
    found = run(machine(tmp_path, {"a.py": source}), "a", "f", x, False)
    assert [(r.message, r.definite) for r in found.raised] == [
        ("seen", False),
        ("named", False),
    ]
    assert isinstance(found.value, Top) and found.value.reads == {"device"}
    # Decided, the list is known: the raise is definite, or not made.
    given = run(machine(tmp_path / "b", {"a.py": source}), "a", "f", True, False)
    assert [(r.message, r.definite) for r in given.raised] == [("seen", True)]
    assert run(machine(tmp_path / "c", {"a.py": source}), "a", "f", False, False).value == []


def test_a_list_one_path_added_to_is_unknown_wherever_it_is_held(tmp_path: Path) -> None:
    """In a dict (`d["k"].append`), a tuple, a module's global: each holder sees an unknown
    list after the join, so nothing definite rests on which path ran (the review's cases)."""
    source = """
SEEN = []

def f(x):
    d = {"k": []}
    pair = ([], 1)
    if x:
        d["k"].append("a")
        pair[0].append("a")
        SEEN.append("a")
    if "a" in d["k"]:
        raise ValueError("in the dict")
    if "a" in pair[0]:
        raise ValueError("in the tuple")
    if "a" in SEEN:
        raise ValueError("in the global")
"""
    x = Top("--device $D: set when the launch runs", frozenset({"device"}))
    found = run(machine(tmp_path, {"a.py": source}), "a", "f", x)
    assert [(r.message, r.definite) for r in found.raised] == [
        ("in the dict", False),
        ("in the tuple", False),
        ("in the global", False),
    ]
    given = run(machine(tmp_path / "b", {"a.py": source}), "a", "f", True)
    assert [(r.message, r.definite) for r in given.raised] == [("in the dict", True)]
