"""tandem's two seeded generators, reproduced in plain Python so a PyTorch
run can train on exactly tandem's batches from exactly tandem's initial
weights (tools/bench/gpt_vs_pytorch.py --same_batches).

- The data order (common/data/sampler.cc): epoch e of N samples is a
  Fisher-Yates shuffle driven by SplitMix64 seeded from (seed, e), with
  Lemire's unbiased bounded draw; global batch s is positions
  [s*B, (s+1)*B) of it (the remainder dropped), rank r of w takes the r-th
  of w contiguous parts (the first B mod w ranks one more).
- The initialisation (common/nn/init.h, InitRng): SplitMix64 from
  seed * 0x9e3779b97f4a7c15 + 1, one Box-Muller normal (cosine branch) per
  value from two uniforms of 53 bits, computed in double and rounded to
  float. GptModel::Initialize (common/nn/gpt.cc) draws, in this order, the
  token and position tables, then per block qkv.weight, proj.weight (std
  0.02 / sqrt(2L)), fc1.weight, fc2.weight (0.02 / sqrt(2L)), then
  head.weight; each parameter row-major in tandem's layout, which for every
  one of them is PyTorch's (Linear weights [out, in], the fused qkv rows
  q, k, v with heads side by side, embeddings [rows, width]). Biases are 0
  and LayerNorm gains 1.

Pure functions, stdlib only (tools/bench/tandem_order_test.py checks them
against the C++ through tandem_order_dump). `init_normals` is ~3 us a value
in CPython; gpt_vs_pytorch.py draws the ~3M of size 1 with torch and checks
its first values against this one.
"""
import math
import struct

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


class _SplitMix64:
    def __init__(self, state):
        self.state = state & MASK

    def next(self):
        self.state = (self.state + GOLDEN) & MASK
        return _mix(self.state)

    def bounded(self, bound):
        """Uniform in [0, bound) (Lemire's method, as sampler.cc)."""
        m = self.next() * bound
        low = m & MASK
        if low < bound:
            threshold = ((1 << 64) - bound) % bound
            while low < threshold:
                m = self.next() * bound
                low = m & MASK
        return m >> 64


def epoch_permutation(n, seed, epoch):
    """The sample order of `epoch` (data::EpochPermutation, shuffle on)."""
    perm = list(range(n))
    if n < 2:
        return perm
    s = _SplitMix64(seed)
    rng = _SplitMix64(s.next() ^ ((epoch * 0xD1B54A32D192ED03) & MASK))
    rng.next()
    for i in range(n - 1, 0, -1):
        j = rng.bounded(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def rank_slice(global_batch, world, rank):
    """(begin, end) of rank `rank`'s part of a global batch, relative to it."""
    base, extra = divmod(global_batch, world)
    begin = rank * base + min(rank, extra)
    return begin, begin + base + (1 if rank < extra else 0)


def rank_batches(n, seed, global_batch, world, rank, steps):
    """Sample indices of `rank`'s batch at each of the first `steps` steps of
    a run from the start (epochs from 0, the remainder dropped), as tandem's
    data server streams them."""
    if global_batch > n:
        raise ValueError(f"global batch {global_batch} exceeds the {n} samples")
    per_epoch = n // global_batch
    lo, hi = rank_slice(global_batch, world, rank)
    out, epoch = [], 0
    while len(out) < steps:
        perm = epoch_permutation(n, seed, epoch)
        for s in range(min(per_epoch, steps - len(out))):
            out.append(perm[s * global_batch + lo:s * global_batch + hi])
        epoch += 1
    return out


def init_state(seed):
    """InitRng's starting state for `seed`."""
    return (seed * GOLDEN + 1) & MASK


def init_normals(seed, count, stddev=1.0, skip=0):
    """Values `skip`..`skip + count` of InitRng(seed).Normal(stddev), as
    Python floats (round each to float32 to get tandem's)."""
    rng = _SplitMix64(init_state(seed))
    rng.state = (rng.state + 2 * skip * GOLDEN) & MASK
    out = []
    for _ in range(count):
        u1 = 1.0 - (rng.next() >> 11) * (1.0 / 9007199254740992.0)
        u2 = (rng.next() >> 11) * (1.0 / 9007199254740992.0)
        out.append(stddev * math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2))
    return out


def f32(x):
    """x rounded to float32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def gpt_init_plan(layers, width, context, vocab=256):
    """[(PyTorch parameter name of gpt_vs_pytorch.Gpt, element count, stddev)]
    in GptModel::Initialize's draw order; the stddevs are the float32 values
    the C++ computes (0.02f, 0.02f / std::sqrt(2.f * L))."""
    std = f32(0.02)
    resid = f32(std / f32(math.sqrt(f32(2.0 * layers))))
    plan = [("tok.weight", vocab * width, std), ("pos.weight", context * width, std)]
    for l in range(layers):
        p = f"blocks.{l}."
        plan += [(p + "qkv.weight", 3 * width * width, std),
                 (p + "proj.weight", width * width, resid),
                 (p + "fc1.weight", 4 * width * width, std),
                 (p + "fc2.weight", 4 * width * width, resid)]
    plan.append(("head.weight", vocab * width, std))
    return plan


def torch_name(tandem_name):
    """gpt_vs_pytorch.Gpt's parameter name for a tandem GPT parameter name
    (common/nn/gpt.cc: "embed.token", "h0.attn.qkv.weight", "h0.mlp.fc1.bias",
    "h0.ln1.weight", "ln_f.bias", "head.weight")."""
    fixed = {"embed.token": "tok.weight", "embed.position": "pos.weight"}
    if tandem_name in fixed:
        return fixed[tandem_name]
    if tandem_name.startswith("h") and tandem_name[1].isdigit():
        layer, rest = tandem_name[1:].split(".", 1)
        rest = rest.split(".", 1)[1] if rest.startswith(("attn.", "mlp.")) else rest
        return f"blocks.{layer}.{rest}"
    return tandem_name
