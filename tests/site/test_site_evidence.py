"""Evidence shows its basis: for each family, every clause of a claim maps to the lines it rests on, and those
lines are in the claim's excerpt — on transformers' own files and on a file shaped like the models' remote code
(attention computed step by step, multi-line statements, experts taken from a list and called one by one).

Each table row is (clause of the claim, needles): the clause must be in the claim, and one of the needles must
be on a shown line of the excerpt. A regression test for issue 14: the model claim said "numbers positions from the
cached length" while the excerpt left those lines out; the attention's use covered only the score product; the
query assembly cited the first of its lines; the routed expert was cited at a ``len(self.experts)`` line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from archviz.code.excerpts import (
    ExcerptLines,
)
from archviz.pipeline import ModelDocs, describe_model
from archviz.provenance.evidence import Evidence
from tests.families.test_families import PUBLISHED

REPO = Path(__file__).parents[2]
K2_RELEASE = REPO / "tests" / "data" / "release-code" / "kimi-k2-instruct" / "modeling_deepseek.py"
K2_CONFIG = REPO / "archviz" / "bundled" / "kimi-k2-instruct" / "config.json"

Clauses = tuple[tuple[str, tuple[str, ...]], ...]

MODEL: Clauses = (
    ("embeds tokens", ("self.embed_tokens(input_ids)",)),
    ("numbers positions from the cached length", ("past_seen_tokens", "past_key_values_length = past_key_values")),
    ("numbers positions", ("torch.arange(",)),
    ("builds the causal mask", ("create_causal_mask(", "_prepare_4d_causal_attention_mask(")),
    ("blocks", ("decoder_layer in",)),
    ("normalizes", ("hidden_states = self.norm(hidden_states)",)),
    ("projects to vocabulary logits", ("logits = self.lm_head(",)),
    ("untied head", ("self.lm_head = nn.Linear(",)),
)
MODEL_FLOAT32: Clauses = (("returning every position's logits in float32", ("logits = logits.float()",)),)
BLOCK: Clauses = (
    ("input RMSNorm", ("self.input_layernorm(hidden_states)",)),
    ("a residual addition", ("hidden_states = residual + hidden_states",)),
    ("post-attention RMSNorm", ("self.post_attention_layernorm(hidden_states)",)),
    ("the FFN", ("self.mlp(hidden_states)",)),
)
BLOCK_ATTENTION: Clauses = (("attention", ("self.self_attn(",)),)
DENSE_FIRST: Clauses = (
    ("the first block uses the dense MLP", ("first_k_dense_replace", "mlp_layer_types[layer_idx]")),
)
ATTENTION: Clauses = (
    ("scores each query", ("torch.matmul(query",)),
    ("under the causal mask", ("attn_weights = attn_weights + attention_mask",)),
    ("takes the softmax", ("nn.functional.softmax(",)),
    ("mixes the values", ("torch.matmul(attn_weights, value_states)",)),
)
# Not in the sentence but part of the step-by-step attention the card must show whole.
ATTENTION_STEPS: Clauses = (("", ("nn.functional.dropout(",)),)
ROUTED_EXPERT: Clauses = (
    ("applied only to the tokens routed to it", ("self.experts(hidden_states, top", "expert_out = expert(")),
)
QUERY_ASSEMBLY: Clauses = (
    ("position-free", ("torch.cat((q_pass, q_rot)", "query_states[:, :, :, : self.qk_nope_head_dim] = q_nope")),
    ("rotated parts", ("torch.cat((q_pass, q_rot)", "query_states[:, :, :, self.qk_nope_head_dim :] = q_pe")),
)
KEY_VALUE: Clauses = (
    ("split into key and value parts", ("[self.qk_nope_head_dim, self.v_head_dim]",)),
    (
        "joined with the shared key slice",
        ("key_states[..., self.qk_nope_head_dim :]", "key_states[:, :, :, self.qk_nope_head_dim :] = k_pe"),
    ),
)
SWIGLU: Clauses = (
    ("multiplies the activated gate projection by the up projection", ("self.act_fn(self.gate_proj(x)) * self.up_",)),
)
DELTA_RULE: Clauses = (("gated delta rule", ("chunk_kimi_delta_attention(", "fused_recurrent_kimi_delta_attention(")),)

CASES: dict[str, dict[str, Clauses]] = {
    "deepseek_v3 transformers": {
        "model": MODEL,
        "block": BLOCK + BLOCK_ATTENTION + DENSE_FIRST,
        "attention.sdpa": ATTENTION + ATTENTION_STEPS,
        "moe.routed-expert": ROUTED_EXPERT,
        "attention.query-concat": QUERY_ASSEMBLY,
        "attention.key-value-split": KEY_VALUE,
        "mlp.act": SWIGLU,
    },
    "deepseek_v3 remote": {
        "model": MODEL + MODEL_FLOAT32,
        "block": BLOCK + BLOCK_ATTENTION,
        "attention.sdpa": ATTENTION + ATTENTION_STEPS,
        "moe.routed-expert": ROUTED_EXPERT,
        "attention.query-concat": QUERY_ASSEMBLY,
        "attention.key-value-split": KEY_VALUE,
        "mlp.act": SWIGLU,
    },
    "kimi_linear transformers": {
        "model": MODEL,
        "block": BLOCK + DENSE_FIRST,
        "attention.sdpa": ATTENTION + ATTENTION_STEPS,
        "moe.routed-expert": ROUTED_EXPERT,
        "attention.key-value-split": KEY_VALUE[:1],
        "kda.delta-rule": DELTA_RULE,
        "mlp.act": SWIGLU,
    },
    "llama transformers": {
        "model": MODEL,
        "block": BLOCK + BLOCK_ATTENTION,
        "attention.sdpa": ATTENTION + ATTENTION_STEPS,
        "mlp.act": SWIGLU,
    },
}


def _docs(case: str, tmp_path: Path) -> ModelDocs:
    if case == "deepseek_v3 transformers":
        return describe_model("kimi-k2-instruct")
    if case == "kimi_linear transformers":
        return describe_model("kimi-linear-48b-a3b-instruct")
    if case == "deepseek_v3 remote":
        # K2's config beside its released modeling_deepseek.py, in a Hub cache snapshot.
        sha = "fd1984e2b7a3" + "0" * 28
        snapshot = tmp_path / "hub" / "models--moonshotai--Kimi-K2-Instruct" / "snapshots" / sha
        snapshot.mkdir(parents=True)
        shutil.copy(K2_CONFIG, snapshot / "config.json")
        shutil.copy(K2_RELEASE, snapshot / "modeling_deepseek.py")
        docs = describe_model(str(snapshot))
        assert docs.sources.file.path == "modeling_deepseek.py"
        return docs
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(PUBLISHED["llama-3.1-8b"]), encoding="utf-8")
    return describe_model(str(folder))


def _claim_evidence(docs: ModelDocs, target: str) -> Evidence:
    """The target's own code evidence: a group's composed claim, or a node's direct code evidence."""
    items = docs.sources.groups.get(target) or docs.sources.nodes[target].evidence
    (item,) = [item for item in items if item.direct and item.file != "config.json"]
    return item


def _shown(item: Evidence) -> str:
    return "\n".join(line for part in item.excerpt if isinstance(part, ExcerptLines) for line in part.lines)


@pytest.mark.parametrize("case", CASES)
def test_every_clause_of_a_claim_is_on_a_shown_line(case: str, tmp_path: Path) -> None:
    docs = _docs(case, tmp_path)
    missing = []
    for target, clauses in CASES[case].items():
        item = _claim_evidence(docs, target)
        shown = _shown(item)
        for clause, needles in clauses:
            assert clause in item.claim, (target, clause, item.claim)
            if not any(needle in shown for needle in needles):
                missing.append(f"{target}: {clause!r} needs one of {needles}")
    assert missing == [], "\n".join(missing)


def test_use_spans_cover_whole_multi_line_statements(tmp_path: Path) -> None:
    """No cited span of the released remote file cuts a statement: every statement starting in it ends in it, but
    an ``if`` shown as the context of a statement in its body (``if self.scoring_func == "sigmoid":`` above
    ``scores = logits.sigmoid()``, whose ``else`` is not cited)."""
    import ast

    docs = _docs("deepseek_v3 remote", tmp_path)
    tree = ast.parse(K2_RELEASE.read_text(encoding="utf-8"))
    statements = [node for node in ast.walk(tree) if isinstance(node, ast.stmt)]
    checked = 0
    for node_id, found in docs.sources.nodes.items():
        for ref in found.refs:
            if ref.file != "modeling_deepseek.py":
                continue
            for statement in statements:
                end = statement.end_lineno or statement.lineno
                if not ref.start <= statement.lineno <= ref.end or end <= ref.end:
                    continue
                cited_inside = [
                    inner
                    for inner in ast.walk(statement)
                    if isinstance(inner, ast.stmt)
                    and inner is not statement
                    and statement.lineno < inner.lineno
                    and inner.lineno <= ref.end
                ]
                assert isinstance(statement, ast.If) and cited_inside, (node_id, ref.start, ref.end, statement.lineno)
            checked += 1
    assert checked > 80
