import { z } from 'zod'

/** A fact about what was measured: its value, or null with the reason it is absent. Never invented. */
function fact<T extends z.ZodType>(value: T) {
  return z.object({
    value: value.nullable(),
    /** Where the value came from (`GET /version`, `llama-server --version`, `sha256 of the GGUF file`…). */
    source: z.string().nullable(),
    /** Why the value is null; null when it is known. */
    reason: z.string().nullable(),
  })
}

export const GpuFactSchema = z.object({
  index: z.int().nonnegative().nullable(),
  name: z.string().nullable(),
  uuid: z.string().nullable(),
  driverVersion: z.string().nullable(),
  memoryTotalMiB: z.number().nullable(),
  /**
   * Power draw when the facts were read, W: a remote deployment's DCGM exporter reports it
   * (`DCGM_FI_DEV_POWER_USAGE`), null where it did not; absent from nvidia-smi's facts (the
   * sampler measures power there).
   */
  powerW: z.number().nullable().optional(),
})

/** Everything known about what a cell measured: engine, model, GPUs, host, harness. */
export const Manifest = z.object({
  engine: z.object({
    kind: z.string(),
    /** `http` engines are measured over loopback; `in-process` ones through the same client interface. */
    shape: z.enum(['http', 'in-process']),
    version: fact(z.string()),
    commit: fact(z.string()),
    /** The full argv as launched, secrets redacted; null when nothing was launched. */
    argv: z.array(z.string()).nullable(),
    /** Names of the environment variables passed to the engine (values are not recorded). */
    envNames: z.array(z.string()),
    /** `CUDA_VISIBLE_DEVICES` as passed; null when not set. */
    visibleDevices: z.string().nullable(),
    tensorParallel: z.int().positive().nullable(),
    /**
     * What a remote endpoint says about itself (an external engine with `remote: true` or a
     * `gpuMetricsUrl`), each fact with its source or the reason it is null; absent for every other engine.
     */
    reported: z
      .object({
        /** The engine that answers: `vllm`, `sglang` or `trtllm` (`GET /get_server_info`, `/v1/models` `owned_by`, `/metrics` names). */
        kind: fact(z.enum(['vllm', 'sglang', 'trtllm'])),
        /** Tensor-parallel size (SGLang's `tp_size`). */
        tensorParallel: fact(z.int().positive()),
        /** The weights the engine loaded (SGLang's `model_path`, vLLM's `/v1/models` `root`). */
        modelPath: fact(z.string()),
        /** The name requests use (SGLang's `served_model_name`, the `/v1/models` `id`). */
        servedModelName: fact(z.string()),
        /** The longest context the engine serves, tokens (`/v1/models` `max_model_len`, SGLang's `context_length`). */
        maxContext: fact(z.int().positive()),
      })
      .optional(),
  }),
  model: z.object({
    id: z.string(),
    revision: z.string().nullable(),
    /** sha256 of the GGUF file or of the weights index, where the engine's files are local. */
    fingerprint: fact(z.string()),
  }),
  gpus: z.discriminatedUnion('status', [
    z.object({
      status: z.literal('ok'),
      devices: z.array(GpuFactSchema),
      /**
       * Where the facts came from when not from nvidia-smi on this host: `dcgm-exporter`, the
       * remote deployment's DCGM exporter (`gpuMetricsUrl`, `--gpu-metrics-url`). Absent: nvidia-smi here.
       */
      source: z.literal('dcgm-exporter').optional(),
      /** The exporter's metrics URL (without user or password), with `source`. */
      url: z.string().optional(),
      /** How the facts were derived from the source (the memory total is a sum of DCGM counters), with `source`. */
      note: z.string().optional(),
    }),
    z.object({ status: z.literal('absent'), reason: z.string() }),
    /**
     * The GPUs serve a remote endpoint and nothing could read them (no `gpuMetricsUrl`, or its
     * exporter did not answer): unknown, never guessed, and unverifiable in the pair checks.
     */
    z.object({ status: z.literal('unknown'), reason: z.string() }),
  ]),
  host: z.object({
    os: z.string(),
    kernel: z.string(),
    arch: z.string(),
    cpuModel: z.string().nullable(),
    cpus: z.int().positive(),
    memoryBytes: z.number().positive(),
    node: z.string(),
  }),
  harness: z.object({
    version: z.string(),
    /** sha256 over servegate's own source files: equal hashes mean the same measuring code. */
    hash: z.string(),
  }),
  /**
   * Where the requests went, for an endpoint allowed to be remote on purpose (`--remote`,
   * `remote: true`); absent for every other target (loopback, as before).
   */
  target: z
    .object({
      /** Host and port of the endpoint, e.g. `10.0.0.2:8000`. */
      host: z.string(),
      /** True when the host is not loopback: the request's path crossed a network. */
      remote: z.boolean(),
      /** True for `https://`. */
      tls: z.boolean(),
    })
    .optional(),
})
export type Manifest = z.infer<typeof Manifest>
