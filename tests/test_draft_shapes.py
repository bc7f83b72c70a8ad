"""Each code shape the draft-side readers handle, in a small synthetic tree: what is read, and
what is left undecided (the check then says nothing rather than guess).

- capture layers: an offset other than +1 is read, not assumed; an inner model chosen by the text
  config's architecture; `end_layer` captured only where the model tests it; a setter whose
  assignment depends on something unknown is not judged;
- loaders: a constant rename is applied; a loader of another shape (a weights-loader helper, an
  unknown rewrite of the name, a test on the name other than a substring or the lookup) is not
  judged;
- lm_head: an `__init__` whose lm_head depends on an unknown condition is not judged;
- draft path: the 0.5.9 shape (`if self.speculative_algorithm in (...)` around the branch);
- deprecations: an action that stops the launch with `parser.error(self.error_message)`.
"""

from __future__ import annotations

from pathlib import Path

from eaglebug.checks.launch.command import parse_launch
from eaglebug.checks.launch.deprecations import check_deprecated_flags
from eaglebug.checks.launch.flags import server_flags
from eaglebug.checks.models.auxlayers import capture
from eaglebug.checks.models.checkpoint import Checkpoint
from eaglebug.checks.models.draft_code import lm_head
from eaglebug.checks.models.draft_path import draft_path_rules
from eaglebug.checks.models.weightmap import loader_shape, unplaceable
from eaglebug.checks.source.index import TreeIndex, find_class
from eaglebug.checks.source.tree import locate
from tests.synthetic import write_tree

MODELS = """
from torch import nn


class InnerModel(nn.Module):
    def __init__(self, config):
        self.layers_to_capture = []
        self.embed_tokens = nn.Embedding(1, 1)
        self.fc = nn.Linear(1, 1)

    def forward(self, x):
        for i in range(self.start_layer, self.end_layer):
            pass
        if self.end_layer in self.layers_to_capture:
            pass


class MinusOne(nn.Module):
    def __init__(self, config):
        self.config = config
        self.model = InnerModel(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if not self.pp_group.is_last_rank:
            return
        if layer_ids is None:
            num_layers = self.config.num_hidden_layers
            self.model.layers_to_capture = [1, num_layers // 2, num_layers - 1]
        else:
            self.model.layers_to_capture = [val - 1 for val in layer_ids]


class Unknown(nn.Module):
    def __init__(self, config):
        self.model = InnerModel(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if self.use_offsets():
            self.model.layers_to_capture = [val + 1 for val in layer_ids]
        else:
            self.model.layers_to_capture = list(layer_ids)


class TextA(nn.Module):
    def __init__(self, config):
        self.model = InnerModel(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.model.layers_to_capture = [val + 1 for val in layer_ids]


class TextB(nn.Module):
    def __init__(self, config):
        self.model = InnerModel(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.model.layers_to_capture = [val + 2 for val in layer_ids]


class Wrapper(nn.Module):
    def __init__(self, config):
        if config.text_config.architectures[0] == "TextA":
            self.language_model = TextA(config.text_config)
        else:
            self.language_model = TextB(config.text_config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.language_model.set_eagle3_layers_to_capture(layer_ids)


class RenamingDraft(nn.Module):
    def __init__(self, config):
        self.model = InnerModel(config)
        if self.decide():
            self.lm_head = self.model.embed_tokens
        else:
            self.lm_head = nn.Linear(1, 1)

    def load_weights(self, weights):
        params_dict = dict(self.named_parameters())
        for name, loaded_weight in weights:
            name = name.replace("eagle.", "")
            if "d2t" in name:
                continue
            param_name = name if name in params_dict else f"model.{name}"


class HelperDraft(nn.Module):
    def __init__(self, config):
        self.model = InnerModel(config)

    def load_weights(self, weights):
        params_dict = dict(self.named_parameters())
        loader = AutoWeightsLoader(self)
        return loader.load_weights(weights)


class RewritingDraft(nn.Module):
    def __init__(self, config):
        self.model = InnerModel(config)

    def load_weights(self, weights):
        params_dict = dict(self.named_parameters())
        for name, loaded_weight in weights:
            name = remap(name)


class RoutingDraft(nn.Module):
    def __init__(self, config):
        self.model = InnerModel(config)

    def load_weights(self, weights):
        params_dict = dict(self.named_parameters())
        for name, loaded_weight in weights:
            if name.startswith("mtp."):
                self.mtp_loader(name, loaded_weight)
                continue
            param_name = name if name in params_dict else f"model.{name}"


EntryClass = [
    MinusOne, Unknown, TextA, TextB, Wrapper, RenamingDraft, HelperDraft, RewritingDraft,
    RoutingDraft,
]
"""

SERVER_ARGS = """
import argparse


class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, error_message=None, nargs=0, **kwargs):
        self.error_message = error_message
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if self.error_message is not None:
            parser.error(self.error_message)
        print_deprecated_warning(f"'{option_string}' is deprecated.")


class ServerArgs:
    def _handle_speculative_decoding(self):
        if self.speculative_algorithm in ("EAGLE3", "STANDALONE"):
            if self.speculative_draft_model_path is None:
                raise ValueError("EAGLE3 needs a draft model path.")

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", type=str)
        parser.add_argument("--speculative-algorithm", type=str)
        parser.add_argument("--speculative-draft-model-path", type=str)
        parser.add_argument(
            "--old-switch",
            action=DeprecatedAction,
            error_message="--old-switch is gone; use --new-switch instead.",
        )
        parser.add_argument("--new-switch", action="store_true")
"""


def tree(tmp_path: Path) -> TreeIndex:
    root = write_tree(
        tmp_path,
        {"sglang/srt/models/shapes.py": MODELS, "sglang/srt/server_args.py": SERVER_ARGS},
    )
    return TreeIndex(locate(str(root)), use_cache=False)


def test_capture_conventions_are_read_not_assumed(tmp_path: Path) -> None:
    index = tree(tmp_path)
    minus = find_class(index, "MinusOne")
    got = capture(index, minus, {"num_hidden_layers": 8}, [0, 4, 7])
    assert got is not None and got.layers == (-1, 3, 6)
    defaults = capture(index, minus, {"num_hidden_layers": 8}, None)
    assert defaults is not None and defaults.layers == (1, 4, 7)
    assert got.reachable == 8  # the file tests `self.end_layer in self.layers_to_capture`
    assert capture(index, find_class(index, "Unknown"), {"num_hidden_layers": 8}, [1]) is None


def test_wrapper_follows_the_inner_class_the_text_config_names(tmp_path: Path) -> None:
    index = tree(tmp_path)
    wrapper = find_class(index, "Wrapper")
    for inner, offset in (("TextA", 1), ("TextB", 2)):
        config = {"text_config": {"architectures": [inner], "num_hidden_layers": 8}}
        got = capture(index, wrapper, config, [1, 2])
        assert got is not None and got.layers == (1 + offset, 2 + offset), inner
        assert got.via and got.via[0].startswith("sglang/srt/models/shapes.py:")
    unnamed = {"text_config": {"num_hidden_layers": 8}}
    assert capture(index, wrapper, unnamed, [1, 2]) is None


def test_loader_shapes(tmp_path: Path) -> None:
    index = tree(tmp_path)
    renaming = find_class(index, "RenamingDraft")
    shape = loader_shape(index, renaming)
    assert shape is not None and shape.renames == (("eagle.", ""),)
    names = frozenset({"eagle.fc.weight", "embed_tokens.weight", "d2t", "stray.weight"})
    assert unplaceable(index, renaming, shape, names) == ["stray.weight"]
    assert loader_shape(index, find_class(index, "HelperDraft")) is None
    assert loader_shape(index, find_class(index, "RewritingDraft")) is None
    assert loader_shape(index, find_class(index, "RoutingDraft")) is None  # startswith routes


def test_lm_head_under_an_unknown_condition_is_not_judged(tmp_path: Path) -> None:
    index = tree(tmp_path)
    assert lm_head(index, find_class(index, "RenamingDraft"), {"vocab_size": 10}) is None
    assert Checkpoint(None, None, "x").has("lm_head.weight") is None


def test_draft_path_rule_inside_an_algorithm_test(tmp_path: Path) -> None:
    index = tree(tmp_path)
    (rule,) = draft_path_rules(index).rules
    assert rule.algorithms == ("EAGLE3", "STANDALONE")
    assert rule.raises == "EAGLE3 needs a draft model path."
    assert draft_path_rules(index).for_algorithm("EAGLE") == []


def test_deprecated_action_that_stops_the_launch(tmp_path: Path) -> None:
    index = tree(tmp_path)
    words = ["--model-path", "m", "--old-switch"]
    (finding,) = check_deprecated_flags(index, parse_launch(words, server_flags(index)))
    assert finding.severity == "error" and finding.fix is not None
    assert finding.fix.text() == "--new-switch"
    words = ["--model-path", "m", "--new-switch"]
    assert check_deprecated_flags(index, parse_launch(words, server_flags(index))) == []
