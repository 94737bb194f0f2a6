"""The runners' allow-lists: ``measure --workload`` and ``profile`` run a model only where every one of its variants
(``Model.variants``, derived from the fields' defaults) is one they are said to run, so that a new Model field is
refused by both until someone adds it to their lists, rather than timed as a plain Llama."""

from __future__ import annotations

import pytest

from rooflinectl.errors import UserError
from rooflinectl.measure.step.support import check_supported
from rooflinectl.profile.build import BUILDS, check_buildable
from rooflinectl.specs.model import Model
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload


class Planted(Model):
    """Llama with a variant no runner has heard of: a field with a default, as every variant is."""

    new_variant: bool = False


def _planted(value: bool) -> Model:
    return Planted(**load_model("llama-3-8b").model_dump(), new_variant=value)


def test_a_new_model_field_is_a_variant_and_both_runners_refuse_it():
    m = _planted(True)
    assert m.variants() == {"max_position_embeddings": 8192, "new_variant": True}
    w = resolve_workload("decode", model=m, batch=1, context=128)
    assert w.model is m
    with pytest.raises(UserError, match="measure --workload: llama-3-8b: no runner for new_variant ") as err:
        check_supported(w)
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="profile builds dense Llama-family models .*; llama-3-8b has new_variant"):
        check_buildable(m)
    # At its default the field is no variant: both run the model as before.
    plain = _planted(False)
    check_supported(resolve_workload("decode", model=plain, batch=1, context=128))
    assert check_buildable(plain) == "llama"


def test_variants_are_the_fields_off_their_defaults():
    assert load_model("llama-3-8b").variants() == {"max_position_embeddings": 8192}
    gemma = load_model("gemma-3-27b")
    assert {"post_norms", "qk_norm", "sliding_window", "layer_pattern", "mlp"} <= set(gemma.variants())
    assert Model.variant_words("mlp", "gelu_tanh") == "the MLP (gelu_tanh)"
    assert Model.variant_words("moe", gemma) == "a mixture of experts"


@pytest.mark.parametrize("model, family", [("llama-3-8b", "llama"), ("mistral-7b", "mistral"),
                                           ("qwen2.5-14b", "qwen2")])
def test_profile_builds_each_family_from_its_variants(model, family):
    assert check_buildable(load_model(model)) == family


def test_profile_refuses_variants_no_one_family_builds_together():
    both = load_model("qwen2.5-14b").model_copy(update={"qk_norm": True})
    with pytest.raises(UserError, match="Q/K norms with biases on Q, K and V, which no one family builds together"):
        check_buildable(both)
    # A user's config names its family: a variant that family does not build is refused.
    with pytest.raises(UserError, match=r"a sliding window \(4096\) \(its config's model_type is llama\)"):
        check_buildable(load_model("mistral-7b"), "llama")
    assert set(BUILDS) == {"llama", "mistral", "qwen2", "qwen3"}


@pytest.mark.parametrize("model, fragment", [
    ("gemma-3-27b", "the MLP (gated_gelu_tanh)"),
    ("gpt-oss-20b", "the MLP (clamped_swiglu)"),
    ("mixtral-8x7b", "a mixture of experts"),
])
def test_measure_workload_names_the_first_variant_it_does_not_run(model, fragment):
    with pytest.raises(UserError, match="measure --workload") as err:
        check_supported(resolve_workload("decode", model=model))
    assert f"{model}: no runner for {fragment}" in str(err.value)
