"""The kind of work of each instruction of an XLA program: matmul, attention, elementwise, optimizer.

`benchmarks/device_profile.py` attributes a traced step's kernels to the HLO
instructions they ran for; this module reads the optimized program's text (as
`--xla_dump_hlo_as_text` writes it, in XLA's long or short printer format) and
says what each instruction is:

- **attention**: a fused attention kernel's custom call (cuDNN's `__cudnn$fmha...`,
  a TPU's flash or splash kernel), or an op traced inside an attention layer but
  not inside one of its dense projections (logits, softmax, the weighted sum and
  their layouts, where no fused kernel runs);
- **matmul**: every other matrix product or convolution, with whatever XLA fused
  into it (cuBLAS and cuBLASLt custom calls, Triton GEMM fusions);
- **optimizer**: the ops traced under the optimizer's name scope;
- **elementwise**: the rest (fusions, reductions, copies, layout changes).

Where an op was traced comes from its `op_name` metadata, JAX's name stack
(`jit(train_step)/transpose(jvp(encoderblock_0))/attention/qkv/dot_general`).
"""

import re

KINDS = ("matmul", "attention", "elementwise", "optimizer", "other")
# Custom-call targets of fused attention kernels: cuDNN's on a GPU (`__cudnn$fmha...`),
# and the Pallas flash and splash kernels on a TPU (named in the call's config).
_FUSED_ATTENTION = re.compile(r"fmha|flash|splash|attention", re.IGNORECASE)
# Library matrix products: cuBLAS and cuBLASLt GEMMs, cuDNN's convolutions.
_LIBRARY_PRODUCT = re.compile(r"cublas|gemm|matmul|cudnn\$conv", re.IGNORECASE)


class Instruction:
    """One HLO instruction of the optimized program: what it is and where it came from."""

    def __init__(self, name, opcode, attributes):
        self.name = name
        self.opcode = opcode
        target = re.search(r'custom_call_target="([^"]*)"', attributes)
        self.target = target.group(1) if target else ""
        source = re.search(r'op_name="([^"]*)"', attributes)
        self.source = source.group(1) if source else ""
        # The computations it runs: a fusion's, a call's, a loop's body and condition.
        self.called = [name for group in re.findall(r"(?:calls|to_apply|body|condition|branch_computations)="
                                                    r"(\{[^}]*\}|%?[\w\-.]+)", attributes)
                       for name in re.findall(r"%?([\w\-.]+)", group)]
        # A custom call's attributes after its operands, metadata left out (an op traced
        # under an attention layer names the layer there; an operand may be named anything):
        # a TPU's Pallas kernels are named in their config, not their target.
        after_operands = attributes.split("), ", 1)[1] if "), " in attributes else ""
        self.config = re.sub(r"metadata=\{[^}]*\}", "", after_operands) if opcode == "custom-call" else ""


def _split_instruction(line):
    """`(name, opcode, rest)` of an HLO instruction line, or None for other lines."""
    head = re.match(r"\s+(?:ROOT )?%?([\w\-.]+) = ", line)
    if not head:
        return None
    rest = line[head.end():]
    if rest.startswith("("):  # a tuple type: skip to its closing parenthesis
        depth = 0
        for end, char in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                break
        rest = rest[end + 1:].lstrip()
    else:
        rest = rest.split(" ", 1)[1] if " " in rest else ""
    opcode = re.match(r"([\w\-]+)\(", rest)
    return (head.group(1), opcode.group(1), rest) if opcode else None


def parse_hlo(text):
    """`(instructions, computations)` of an HLO module's text.

    Args:
        text: The module as XLA dumps it (`--xla_dump_hlo_as_text`).

    Returns:
        `{name: Instruction}` over every computation, and `{computation: [names]}`.
    """
    instructions, computations, current = {}, {}, None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith("{"):
            header = re.match(r"(?:ENTRY )?%?([\w\-.]+)[ (]", line)
            current = header.group(1) if header and not line.startswith("HloModule") else None
            computations.setdefault(current, [])
            continue
        parts = _split_instruction(line)
        if parts and current is not None:
            instructions[parts[0]] = Instruction(*parts)
            computations[current].append(parts[0])
    return instructions, computations


def _layer_name(segment):
    """The layer a name-stack segment names: `transpose(jvp(encoderblock_0))` -> `encoderblock_0`."""
    return re.sub(r"^(?:[\w]+\()+|\)+$", "", segment)


class Classifier:
    """Kind of work of each instruction of one optimized program.

    Args:
        instructions: `{name: Instruction}` from `parse_hlo`.
        computations: `{computation: [names]}` from `parse_hlo`.
        attention_layers: `{layer name: names of its sublayers}` for the model's
            attention layers: their ops are attention unless under a sublayer.
        optimizer_scope: The optimizer's name scope (`optimizer.name`).
    """

    def __init__(self, instructions, computations, attention_layers, optimizer_scope):
        self.instructions = instructions
        self.computations = computations
        self.attention_layers = attention_layers
        self.optimizer_scope = optimizer_scope
        self._kinds = {}

    def _inner(self, instruction, seen=None):
        """The instruction and every instruction of the computations it calls, transitively."""
        seen = set() if seen is None else seen
        found = [instruction]
        for computation in instruction.called:
            if computation in seen:
                continue
            seen.add(computation)
            for name in self.computations.get(computation, ()):
                found += self._inner(self.instructions[name], seen)
        return found

    def in_attention(self, source):
        """Whether an op traced at `source` (its `op_name`) is attention's own work."""
        segments = [_layer_name(segment) for segment in source.split("/")]
        for index, segment in enumerate(segments[:-1]):  # the last segment is the primitive
            if segment in self.attention_layers:
                following = segments[index + 1] if index + 2 < len(segments) else None
                if following not in self.attention_layers[segment]:
                    return True
        return False

    def kind(self, name):
        """`"matmul"`, `"attention"`, `"elementwise"` or `"optimizer"` for an instruction name."""
        if name not in self._kinds:
            self._kinds[name] = self._kind(self.instructions[name])
        return self._kinds[name]

    def _kind(self, instruction):
        inner = self._inner(instruction)
        calls = [i for i in inner if i.opcode == "custom-call"]
        if any(_FUSED_ATTENTION.search(i.target) or _FUSED_ATTENTION.search(i.config) for i in calls):
            return "attention"
        products = [i for i in inner if i.opcode in ("dot", "convolution")
                    or (i.opcode == "custom-call" and _LIBRARY_PRODUCT.search(i.target))]
        if products:
            return "attention" if any(self.in_attention(i.source) for i in products) else "matmul"
        # A fusion carries its root's source; an unfused op, its own.
        source = instruction.source or next((i.source for i in inner if i.source), "")
        if f"/{self.optimizer_scope}/" in f"/{source}":
            return "optimizer"
        return "attention" if self.in_attention(source) else "elementwise"
