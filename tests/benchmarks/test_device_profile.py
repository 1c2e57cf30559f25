"""`benchmarks/device_profile.py` and `hlo_kinds.py`: a GPU's kernels attributed to kinds of work, and a CPU run.

A GPU's trace and program are written here in the formats XLA and its profiler use
(the optimized HLO text of `--xla_dump_hlo_as_text`; an XSpace with the `hlo_op`,
`hlo_module` and `program_id` stats that CUPTI's collector copies from XLA's kernel
annotations), so that the attribution a device call relies on is checked on a CPU.
"""

import os
import re
import subprocess
import sys

import pytest

from benchmarks import device_profile, hlo_kinds

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEP = "jit(train_step)"

# A GPU program's shape: cuBLAS for the projections (one from inside the attention layer),
# cuDNN's fused attention, a Triton GEMM fusion, a layer norm's fusion, attention's layout
# copy, an AdamW update, and a while loop whose body holds one more fusion.
GPU_PROGRAM = f"""HloModule jit_train_step, is_scheduled=true, entry_computation_layout={{(bf16[8]{{0}})->bf16[8]{{0}}}}

%gemm_fusion_dot.1_computation (parameter_0: bf16[394,768], parameter_1: bf16[768,3072]) -> bf16[394,3072] {{
  %parameter_0 = bf16[394,768]{{1,0}} parameter(0)
  %parameter_1 = bf16[768,3072]{{1,0}} parameter(1)
  ROOT %dot.1 = bf16[394,3072]{{1,0}} dot(%parameter_0, %parameter_1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, metadata={{op_name="{STEP}/jvp(encoderblock_0)/mlp/fc1/dot_general"}}
}}

%fused_norm (param_0: bf16[394,768]) -> bf16[394,768] {{
  %param_0 = bf16[394,768]{{1,0}} parameter(0)
  ROOT %multiply.3 = bf16[394,768]{{1,0}} multiply(%param_0, %param_0), metadata={{op_name="{STEP}/jvp(encoderblock_0)/norm1/mul"}}
}}

%fused_layout (param_0.1: bf16[2,197,2304]) -> bf16[2,12,197,64] {{
  %param_0.1 = bf16[2,197,2304]{{2,1,0}} parameter(0)
  ROOT %transpose.2 = bf16[2,12,197,64]{{3,2,1,0}} transpose(%param_0.1), dimensions={{0,2,1,3}}, metadata={{op_name="{STEP}/jvp(encoderblock_0)/attention/transpose"}}
}}

%fused_adam (param_0.2: f32[768], param_1.2: f32[768]) -> f32[768] {{
  %param_0.2 = f32[768]{{0}} parameter(0)
  %param_1.2 = f32[768]{{0}} parameter(1)
  ROOT %add.9 = f32[768]{{0}} add(%param_0.2, %param_1.2), metadata={{op_name="{STEP}/adam_w/add"}}
}}

%body (p: (s32[], bf16[8])) -> (s32[], bf16[8]) {{
  %p = (s32[], bf16[8]{{0}}) parameter(0)
  %loop_fusion.7 = bf16[8]{{0}} fusion(%p), kind=kLoop, calls=%fused_norm, metadata={{op_name="{STEP}/jvp(encoder_norm)/mul"}}
  ROOT %tuple.1 = (s32[], bf16[8]{{0}}) tuple(%p, %loop_fusion.7)
}}

%condition (p.1: (s32[], bf16[8])) -> pred[] {{
  %p.1 = (s32[], bf16[8]{{0}}) parameter(0)
  ROOT %constant.1 = pred[] constant(false)
}}

ENTRY %main.9 (Arg_0.1: bf16[8]) -> bf16[8] {{
  %Arg_0.1 = bf16[8]{{0}} parameter(0)
  %custom-call.3 = (bf16[394,2304]{{1,0}}, s8[4194304]{{0}}) custom-call(%Arg_0.1, %Arg_0.1), custom_call_target="__cublas$gemm", metadata={{op_name="{STEP}/jvp(encoderblock_0)/attention/qkv/dot_general"}}, backend_config={{"gemm_backend_config":{{"alpha_real":1}}}}
  %custom-call.4 = (bf16[2,12,197,64]{{3,2,1,0}}, u8[0]{{0}}) custom-call(%Arg_0.1), custom_call_target="__cudnn$fmhaSoftmax", metadata={{op_name="{STEP}/jvp(encoderblock_0)/attention/dot_product_attention"}}
  %gemm_fusion_dot.1 = bf16[394,3072]{{1,0}} fusion(%Arg_0.1, %Arg_0.1), kind=kCustom, calls=%gemm_fusion_dot.1_computation, metadata={{op_name="{STEP}/jvp(encoderblock_0)/mlp/fc1/dot_general"}}
  %loop_fusion.2 = bf16[394,768]{{1,0}} fusion(%Arg_0.1), kind=kLoop, calls=%fused_norm, metadata={{op_name="{STEP}/jvp(encoderblock_0)/norm1/mul"}}
  %transpose_fusion = bf16[2,12,197,64]{{3,2,1,0}} fusion(%Arg_0.1), kind=kLoop, calls=%fused_layout
  %loop_fusion.5 = f32[768]{{0}} fusion(%Arg_0.1, %Arg_0.1), kind=kLoop, calls=%fused_adam, metadata={{op_name="{STEP}/adam_w/add"}}
  %while.1 = (s32[], bf16[8]{{0}}) while(%Arg_0.1), condition=%condition, body=%body
  ROOT %copy.1 = bf16[8]{{0}} copy(%Arg_0.1)
}}
"""


def _short(program):
    """The program as XLA's short printer writes it: no `%`, computations by name alone."""
    lines = [re.sub(r"^((?:ENTRY )?%\S+) \(.*\) -> .* \{$", r"\1 {", line) for line in program.splitlines()]
    return "\n".join(lines).replace("%", "")


def _trace(events, plane="/device:GPU:0"):
    """An XSpace as text: one device, its kernels on lines named as CUPTI's collector names them.

    `events` holds (line, kernel, hlo_op or None, hlo_module, start ns, duration ns).
    """
    names, stats = {}, {"hlo_op": 1, "hlo_module": 2, "program_id": 3}
    lines = {}
    for line, kernel, op, module, start, duration in events:
        metadata = names.setdefault(kernel, len(names) + 1)
        fields = [f'stats {{ metadata_id: 2 str_value: "{module}" }}', "stats { metadata_id: 3 int64_value: 17 }"]
        if op:
            fields.insert(0, f'stats {{ metadata_id: 1 str_value: "{op}" }}')
        lines.setdefault(line, []).append(
            f"events {{ metadata_id: {metadata} offset_ps: {start * 1000} duration_ps: {duration * 1000} "
            + " ".join(fields) + " }")
    body = "".join(f'lines {{ id: {index} name: "{line}" timestamp_ns: 0 {" ".join(items)} }}\n'
                   for index, (line, items) in enumerate(lines.items(), 1))
    body += "".join(f'event_metadata {{ key: {key} value {{ id: {key} name: "{name}" }} }}\n'
                    for name, key in names.items())
    body += "".join(f'stat_metadata {{ key: {key} value {{ id: {key} name: "{name}" }} }}\n'
                    for name, key in stats.items())
    host = 'planes { id: 2 name: "/host:CPU" lines { id: 1 name: "python" events { metadata_id: 1 duration_ps: 9 } } ' \
           'event_metadata { key: 1 value { id: 1 name: "train_on_batch" } } }'
    return f'planes {{ id: 1 name: "{plane}"\n{body}}}\n{host}'


STREAM, MODULES = "Stream #7(Kernel,MemcpyD2D)", "XLA Modules"
GPU_EVENTS = [  # (line, kernel, hlo_op, module, start ns, duration ns)
    (STREAM, "sm90_xmma_gemm_bf16bf16_bf16f32", "custom-call.3", "jit_train_step", 0, 300),
    (STREAM, "cudnn_generated_fort_native_sdpa_sm90", "custom-call.4", "jit_train_step", 300, 200),
    (STREAM, "gemm_fusion_dot_1", "gemm_fusion_dot.1", "jit_train_step", 500, 400),
    (STREAM, "loop_fusion_2", "loop_fusion.2", "jit_train_step", 1000, 50),  # 100 ns idle before it
    (STREAM, "transpose_fusion", "transpose_fusion", "jit_train_step", 1050, 30),
    (STREAM, "loop_fusion_5", "loop_fusion.5", "jit_train_step", 1080, 20),
    (STREAM, "loop_fusion_7", "loop_fusion.7", "jit_train_step", 1100, 10),  # inside the while loop's body
    (STREAM, "MemcpyD2D", None, "jit_train_step", 1110, 40),
    # The module's own span on its line, and another program's kernel: neither counts.
    (MODULES, "jit_train_step(17)", None, "jit_train_step", 0, 1150),
    (STREAM, "reduce_fusion", "loop_fusion.2", "jit_convert_element_type", 2000, 5),
]


def _classifier(program=GPU_PROGRAM):
    instructions, computations = hlo_kinds.parse_hlo(program)
    return hlo_kinds.Classifier(instructions, computations, {"attention": {"qkv", "out"}}, "adam_w")


@pytest.mark.parametrize("printer", ["long", "short"])
def test_every_instruction_of_a_gpu_program_gets_its_kind(printer):
    classifier = _classifier(GPU_PROGRAM if printer == "long" else _short(GPU_PROGRAM))
    assert len(classifier.instructions) == 24 and "while.1" in classifier.instructions
    kinds = {name: classifier.kind(name) for name in (
        "custom-call.3", "custom-call.4", "gemm_fusion_dot.1", "loop_fusion.2", "transpose_fusion",
        "loop_fusion.5", "loop_fusion.7", "copy.1")}
    assert kinds == {
        "custom-call.3": "matmul",  # the qkv projection, though traced inside the attention layer
        "custom-call.4": "attention",  # cuDNN's fused kernel
        "gemm_fusion_dot.1": "matmul",  # a Triton GEMM: its dot is inside the fusion
        "loop_fusion.2": "elementwise",
        "transpose_fusion": "attention",  # no metadata of its own: its root's, under the attention layer
        "loop_fusion.5": "optimizer",
        "loop_fusion.7": "elementwise",  # found inside the while loop's body
        "copy.1": "elementwise",
    }


def test_the_attention_layer_split_by_where_an_op_was_traced():
    classifier = _classifier()
    assert classifier.in_attention(f"{STEP}/transpose(jvp(encoderblock_3))/attention/vmap()/reduce_max")
    assert classifier.in_attention(f"{STEP}/jvp(encoderblock_3)/attention/reshape")
    assert not classifier.in_attention(f"{STEP}/transpose(jvp(encoderblock_3))/attention/out/dot_general")
    assert not classifier.in_attention(f"{STEP}/jvp(encoderblock_3)/mlp/fc1/dot_general")
    # A primitive that happens to be called like the layer is not the layer.
    assert not classifier.in_attention(f"{STEP}/jvp(encoderblock_3)/attention")


def test_a_gpu_trace_is_summed_per_kind_from_its_stream_kernels_only():
    import jax

    space = jax.profiler.ProfileData.from_text_proto(_trace(GPU_EVENTS))
    events = device_profile.kernel_events(space)
    # The "XLA Modules" line spans the kernels it ran: counting it would count them twice.
    assert len(events) == 9 and all(event[0] != "jit_train_step(17)" for event in events)
    assert device_profile.step_module(events) == ("jit_train_step", 17)
    events = [event for event in events if event[2] == "jit_train_step"]
    assert device_profile.busy_ns(events) == 1050  # 1,150 ns span less the 100 ns gap
    lines, per_kind = device_profile.summarize(events, _classifier(), steps=2, top=3)
    assert dict(per_kind) == {"matmul": 700, "attention": 230, "elementwise": 60, "optimizer": 20, "other": 40}
    table = "\n".join(lines)
    assert "| matmul | 0.00 | 66.7% | 1 |" in table  # 700 of 1,050 ns, over two steps
    assert "| other | 0.00 | 3.8% | 0 |" in table
    kernel_rows = [line for line in lines if line.startswith("| `")]
    assert [row.split("|")[1].strip() for row in kernel_rows] == [
        "`gemm_fusion_dot_1`", "`sm90_xmma_gemm_bf16bf16_bf16f32`", "`cudnn_generated_fort_native_sdpa_sm90`"]
    assert "| matmul | jvp(encoderblock_*)/mlp/fc1/dot_general |" in kernel_rows[0]


def test_a_tpu_trace_is_read_from_its_xla_ops_line():
    import jax

    # A TPU's ops are named after their instructions, on "XLA Ops", beside the module's span.
    events = [("XLA Ops", "gemm_fusion_dot.1", None, "", 0, 300), ("XLA Ops", "loop_fusion.5", None, "", 300, 100),
              ("XLA Modules", "jit_train_step(17)", None, "", 0, 400)]
    found = device_profile.kernel_events(jax.profiler.ProfileData.from_text_proto(_trace(events, "/device:TPU:0")))
    assert [(event[0], event[1]) for event in found] == [("gemm_fusion_dot.1", "gemm_fusion_dot.1"),
                                                         ("loop_fusion.5", "loop_fusion.5")]
    _, per_kind = device_profile.summarize(found, _classifier(), steps=1, top=1)
    assert per_kind["matmul"] == 300 and per_kind["optimizer"] == 100


def test_the_dump_file_is_the_one_the_trace_ran(tmp_path):
    (tmp_path / "module_0017.jit_train_step.sm_9.0_gpu_after_optimizations.txt").write_text(GPU_PROGRAM)
    (tmp_path / "module_0017.jit_train_step.sm_9.0_gpu_after_optimizations-buffer-assignment.txt").write_text("x")
    # An earlier compilation of the same module, with other instruction names.
    (tmp_path / "module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.txt").write_text(
        GPU_PROGRAM.replace("loop_fusion.", "input_fusion."))
    expected = sorted(hlo_kinds.parse_hlo(GPU_PROGRAM)[0])

    def found(*args):
        return sorted(device_profile.find_program(str(tmp_path), *args)[0])

    assert found("jit_train_step", 17, set()) == expected  # by the trace's program id
    # Without a program id, the candidate that holds the traced ops; without a module name
    # (a TPU's ops may carry none), any module's.
    assert found("jit_train_step", None, {"loop_fusion.2", "loop_fusion.5"}) == expected
    assert found(None, None, {"loop_fusion.2"}) == expected
    assert found(None, None, {"input_fusion.2"}) != expected
    assert device_profile.step_module([("fusion", "fusion.1", "", None, 0, 5)]) == (None, None)
    with pytest.raises(RuntimeError, match="no optimized program named jit_eval_step"):
        device_profile.find_program(str(tmp_path), "jit_eval_step", None, set())


def test_a_cpu_run_attributes_the_step_to_every_kind(tmp_path):
    output = tmp_path / "profile.md"
    result = subprocess.run(
        [sys.executable, "benchmarks/device_profile.py", "--variant=ViT_Ti16", "--image_size=32", "--batch_size=2",
         "--depth=1", "--steps=1", f"--output={output}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "KERAS_VIT_CODE_PATH": "accelerator", "TMPDIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    table = output.read_text()
    assert table in result.stdout
    shares = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) == 6 and cells[1] in hlo_kinds.KINDS:
            shares[cells[1]] = float(cells[3].rstrip("%"))
    assert sorted(shares) == sorted(hlo_kinds.KINDS) and abs(sum(shares.values()) - 100) < 0.3, table
    # XLA's attention on the CPU (no fused kernel), the products, AdamW and the rest all ran.
    assert all(shares[kind] > 0 for kind in ("matmul", "attention", "elementwise", "optimizer")), table
    assert "code path accelerator" in table
    # Nothing of the dump or the trace outlives the run.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["profile.md"]
