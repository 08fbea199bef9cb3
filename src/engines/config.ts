import { availableParallelism } from 'node:os'
import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { parseBaseUrl } from '../loopback.ts'
import { MIN_SECRET_CHARS, registerEnvSecrets } from '../secrets.ts'

/** The model an engine serves: its id (the name requests use), revision, and local files if any. */
export const ModelRef = z.object({
  /** The served model name, e.g. `Qwen/Qwen3-8B`. */
  id: z.string().min(1),
  /** A revision (commit or tag) where the weights come from a hub; recorded in the manifest. */
  revision: z.string().min(1).nullable().default(null),
  /** Local weights: a GGUF file (llama.cpp) or a directory with a weights index. */
  path: z.string().min(1).optional(),
})
export type ModelRef = z.infer<typeof ModelRef>

/** Environment variables passed through from servegate's own environment by default. */
const DEFAULT_INHERITED_ENV = [
  'PATH',
  'HOME',
  'USER',
  'LANG',
  'LC_ALL',
  'TMPDIR',
  'LD_LIBRARY_PATH',
  'CUDA_HOME',
  'HF_HOME',
  'HF_HUB_CACHE',
  'HF_TOKEN',
  'HUGGING_FACE_HUB_TOKEN',
  'XDG_CACHE_HOME',
  'VIRTUAL_ENV',
  'PYTHONPATH',
]

const launched = {
  model: ModelRef,
  /** Loopback port; 0 picks a free one. @default 0 */
  port: z.int().min(0).max(65535).default(0),
  /** Extra environment for the engine; merged over the inherited variables. */
  env: z.record(z.string(), z.string()).default({}),
  /** Names of servegate's own environment variables passed to the engine; nothing else is. */
  inheritEnv: z.array(z.string()).default(DEFAULT_INHERITED_ENV),
  /**
   * Names of engine environment variables whose values are secret, besides those secret by name
   * (`*_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`… with a value of 8 characters or more): their
   * values are scrubbed from the engine log, its tails and everything else servegate writes.
   * A listed value must have at least 4 characters. @default []
   * @example ['MY_ENGINE_LICENSE']
   */
  secretEnv: z.array(z.string()).default([]),
  /** GPU placement: `CUDA_VISIBLE_DEVICES` (indices or GPU UUIDs); null leaves it unset. */
  gpus: z.string().nullable().default(null),
  /** Tensor-parallel size. @default 1 */
  tensorParallel: z.int().min(1).default(1),
  /** Maximum context length, tokens; null keeps the engine's default. */
  maxContext: z.int().positive().nullable().default(null),
  /** Arguments appended as given (never through a shell). */
  extraArgs: z.array(z.string()).default([]),
  /** Deadline for the engine to become ready, ms. @default 900000 (GPU engines load weights for minutes) */
  startupTimeoutMs: z.int().positive().default(900_000),
  /** Time between SIGTERM and SIGKILL at teardown, ms. @default 10000 */
  shutdownGraceMs: z.int().positive().default(10_000),
  /** Where engine logs are written. @default the environment's log directory ('.servegate/logs' unless set) */
  logDir: z.string().min(1).optional(),
}

/**
 * Options of an engine whose GPUs are not on this host (an `external` endpoint, a deployment on
 * Kubernetes): where the manifest's GPU facts come from instead of nvidia-smi. Spread into each
 * such config, and checked with {@link checkGpuMetricsUrl}.
 */
const remoteFactsOptions = {
  /**
   * The DCGM exporter's metrics URL of the deployment's GPUs (`http://HOST:9400/metrics`): the
   * manifest's GPU model, count, memory, driver and power come from it, with their source. On
   * another host only when the engine is remote. Unset: nvidia-smi here for a loopback endpoint,
   * unknown (and unverifiable in the pair checks) for a remote one.
   * @example 'http://10.0.0.5:9400/metrics'
   */
  gpuMetricsUrl: z.string().min(1).optional(),
}

/**
 * Checks a `gpuMetricsUrl`: an http(s) URL, on loopback unless the engine is remote.
 * @param field the option named in errors (`engine.gpuMetricsUrl`)
 * @throws ServegateError CONFIG_INVALID naming the field and the fix
 */
export function checkGpuMetricsUrl(raw: string | undefined, remote: boolean, field: string): void {
  if (raw === undefined) return
  let url: URL
  try {
    url = new URL(raw)
  } catch (error) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `${field}: "${raw}" is not a URL; pass the DCGM exporter's metrics URL, e.g. http://10.0.0.5:9400/metrics`,
      { cause: error },
    )
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ServegateError('CONFIG_INVALID', `${field}: protocol ${url.protocol} is not supported; use http:// or https://`)
  try {
    parseBaseUrl(url.origin, remote)
  } catch (error) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `${field}: ${url.hostname} is not a loopback address; nothing was sent to it. ` +
        'A DCGM exporter on another host goes with a remote engine: set remote: true (or pass --remote)',
      { cause: error },
    )
  }
}

/** A DNS-1123 label: what Kubernetes takes as a namespace or an object's name, and Helm as a release name. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/
const dnsLabel = (max: number, what: string) =>
  z
    .string()
    .max(max, `${what} has at most ${max} characters`)
    .regex(DNS_LABEL, `${what} must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit`)

/** A workload `kubectl rollout status` follows: `deployment/NAME`, `statefulset/NAME` or `daemonset/NAME`. */
const ROLLOUT_TARGET = /^(deployment|statefulset|daemonset)(\.apps)?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/

/** A Helm release: the chart, its name, and the values it is installed with. */
const HelmRelease = z.object({
  /** The chart: a local directory or archive, `repo/name`, or an `oci://` reference. */
  chart: z.string().min(1),
  /** The release name (`helm install RELEASE CHART`), a DNS-1123 label of at most 53 characters. */
  release: dnsLabel(53, 'a Helm release name'),
  /** Values files (`-f FILE`), in order. @default [] */
  values: z.array(z.string().min(1)).default([]),
  /** Values set on the command line (`--set KEY=VALUE`, Helm's own syntax), after the files. @default {} */
  set: z.record(z.string().min(1), z.string()).default({}),
  /** The chart version (`--version`); unset: the latest. */
  version: z.string().min(1).optional(),
  /** The helm executable. @default 'helm' */
  executable: z.string().min(1).default('helm'),
})

/** A condition `kubectl wait --for=condition=CONDITION RESOURCE` waits on. */
const WaitCondition = z.object({
  /** `TYPE/NAME`, e.g. `deployment/vllm`, `leaderworkerset.leaderworkerset.x-k8s.io/vllm`. */
  resource: z.string().regex(/^[a-z0-9.-]+\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be TYPE/NAME, e.g. deployment/vllm'),
  /** The status condition's type. @default 'Available' */
  condition: z
    .string()
    .regex(/^[A-Za-z][A-Za-z0-9]*$/, 'must be a condition type, e.g. Available or Ready')
    .default('Available'),
})

/**
 * A deployment on Kubernetes, launched and torn down through kubectl or helm (never reimplemented):
 * a manifest applied (`kubectl apply -f`) or a chart installed (`helm install`), waited on, and
 * measured at `baseUrl`, a gateway or Service on another host by nature.
 */
const kubernetes = z.object({
  kind: z.literal('kubernetes'),
  /** The endpoint the cell measures once the deployment is ready: the gateway's or the Service's URL. */
  baseUrl: z.string(),
  model: ModelRef,
  /** The namespace everything is applied, installed, waited on and deleted in. @default 'default' */
  namespace: dnsLabel(63, 'a namespace').default('default'),
  /** A YAML manifest applied with `kubectl apply -f` and deleted with `kubectl delete -f`; or set `helm`. */
  manifest: z.string().min(1).optional(),
  /** A Helm release installed with `helm install --wait` and removed with `helm uninstall --wait`; or set `manifest`. */
  helm: HelmRelease.optional(),
  /**
   * Workloads whose rollout is awaited (`kubectl rollout status TYPE/NAME`), in order.
   * @default []
   * @example ['deployment/vllm']
   */
  rollout: z.array(z.string().regex(ROLLOUT_TARGET, 'must be deployment/NAME, statefulset/NAME or daemonset/NAME')).default([]),
  /** Conditions awaited (`kubectl wait --for=condition=…`), after the rollouts. @default [] */
  wait: z.array(WaitCondition).default([]),
  /**
   * Readiness path polled at `baseUrl` until it answers 200, after the rollouts and conditions (a
   * gateway forwards the OpenAI routes; its own health path may not reach the engine).
   * @default '/v1/models'
   */
  healthPath: z.string().startsWith('/').default('/v1/models'),
  /** Deadline from apply or install until the gateway answers, ms. @default 900000 (GPU engines load weights for minutes) */
  startupTimeoutMs: z.int().positive().default(900_000),
  /** Deadline for the delete or uninstall, and again for the check that nothing is left, ms. @default 300000 */
  teardownTimeoutMs: z.int().positive().default(300_000),
  /** The kube context (`kubectl --context`, `helm --kube-context`); unset: the current one. */
  context: z.string().min(1).optional(),
  /** A kubeconfig file (`--kubeconfig`); unset: `KUBECONFIG` or `~/.kube/config`, as the tools read them. */
  kubeconfig: z.string().min(1).optional(),
  /** The kubectl executable. @default 'kubectl' */
  kubectl: z.string().min(1).default('kubectl'),
  /** A PEM file of the CA an `https://` `baseUrl`'s certificate is verified against; unset: the system's CAs. */
  caFile: z.string().min(1).optional(),
  ...remoteFactsOptions,
})

/** Engine configs, chosen by `kind`. Defaults are filled here, once. */
export const EngineConfig = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('vllm'), executable: z.string().default('vllm'), ...launched }),
  z.object({ kind: z.literal('sglang'), python: z.string().default('python'), ...launched }),
  z.object({
    kind: z.literal('llama-server'),
    executable: z.string().default('llama-server'),
    ...launched,
    /** Parallel slots (`-np`); the context is divided among them. @default 1 */
    slots: z.int().min(1).default(1),
    /**
     * CPU threads (`-t`); null leaves llama.cpp's own default (its count of physical cores). One
     * by default: with the layers on the GPU the CPU only samples, and on a small shared CPU host
     * llama.cpp's default competes with the client for the cores it measures with. @default 1
     */
    threads: z.int().min(1).nullable().default(1),
    /**
     * Layers offloaded to the GPU (`-ngl`): a count (999 offloads every layer, 0 keeps the model
     * on the CPU), null for no `-ngl` (the build's own default: zero layers on older builds), or
     * `'auto'`: 999 when `gpus` is set or nvidia-smi shows a GPU on the host, else no `-ngl`.
     * @default 'auto'
     */
    gpuLayers: z
      .union([z.int().min(0), z.literal('auto')])
      .nullable()
      .default('auto'),
    /**
     * A draft model for speculative decoding (`-md`): the path of a GGUF with the model's
     * vocabulary, offloaded like the model (`-ngld`, with `gpuLayers`). The record's
     * `metrics.specDecode` then holds the draft acceptance. Null: no draft model. @default null
     * @example '/models/qwen2.5-0.5b-instruct-q8_0.gguf'
     */
    draftModel: z.string().min(1).nullable().default(null),
    /**
     * `--spec-type`, passed with `draftModel`: builds since May 2026 (PR #22964) load a draft model
     * and never draft with it unless the type says so. Null leaves the flag out, for older builds,
     * which draft with `-md` alone and refuse the flag. @default 'draft-simple'
     */
    draftType: z.string().min(1).nullable().default('draft-simple'),
  }),
  z.object({ kind: z.literal('trtllm'), executable: z.string().default('trtllm-serve'), ...launched }),
  z.object({
    kind: z.literal('command'),
    /**
     * The argv, never run through a shell. Placeholders: `{port}`, `{host}`, `{modelId}` (the
     * served name, `model.id`) and `{modelPath}` (the local weights, `model.path`, which must then
     * be set). The ambiguous `{model}` is refused.
     */
    argv: z
      .array(z.string())
      .min(1)
      .superRefine((argv, ctx) => {
        if (argv.some((a) => a.includes('{model}'))) {
          ctx.addIssue({
            code: 'custom',
            message: '{model} is ambiguous; use {modelId} for the served name or {modelPath} for the local weights',
          })
        }
      }),
    /** Readiness path polled until it answers 200. @default '/health' */
    healthPath: z.string().startsWith('/').default('/health'),
    /** An argv that prints the engine's version, run once. */
    versionArgv: z.array(z.string()).min(1).optional(),
    ...launched,
  }),
  z.object({
    kind: z.literal('external'),
    /** An endpoint that is already up, on loopback unless `remote`; nothing is launched or torn down. */
    baseUrl: z.string(),
    model: ModelRef,
    /**
     * True allows a `baseUrl` on another host (a gateway, a Kubernetes Service): a remote endpoint
     * is only ever named on purpose. Loopback needs nothing. @default false
     */
    remote: z.boolean().default(false),
    /** A PEM file of the CA an `https://` endpoint's certificate is verified against; unset: the system's CAs. */
    caFile: z.string().min(1).optional(),
    ...remoteFactsOptions,
  }),
  z.object({
    kind: z.literal('node-llama-cpp'),
    model: ModelRef.extend({ path: z.string().min(1) }),
    /** CPU threads; keep 1 on small machines (the default thread count nearly hangs 2 cores). @default 1 */
    threads: z.int().min(1).default(1),
    /** Context size, tokens, shared by the sequences. @default 4096 */
    contextSize: z.int().min(64).default(4096),
    /** Parallel sequences (concurrent requests). @default 1 */
    sequences: z.int().min(1).default(1),
  }),
  kubernetes,
])
export type EngineConfig = z.input<typeof EngineConfig>
/** Every engine config's `kind`, in the order the docs list them. */
export const ENGINE_KINDS = EngineConfig.options.map((o) => o.shape.kind.value)
export type ResolvedEngineConfig = z.infer<typeof EngineConfig>
export type EngineKind = ResolvedEngineConfig['kind']
export type LaunchedConfig = Extract<ResolvedEngineConfig, { shutdownGraceMs: number }>

/** Validates an engine config; the error names each bad field and the fix. */
export function resolveEngineConfig(input: unknown, source = 'engine'): ResolvedEngineConfig {
  const result = EngineConfig.safeParse(input)
  if (!result.success) {
    const issues = result.error.issues.map((i) => {
      const field = [source, ...i.path].join('.')
      return i.code === 'invalid_union' && (i.path.length === 0 || (i.path.length === 1 && i.path[0] === 'kind'))
        ? `${source}.kind: must be one of ${ENGINE_KINDS.join(', ')}`
        : `${field}: ${i.message}`
    })
    throw new ServegateError('CONFIG_INVALID', `invalid engine config: ${issues.join('; ')}`)
  }
  const config = result.data
  if (config.kind === 'external') {
    // A remote host without `remote: true` fails at declaration, before anything is sent.
    try {
      parseBaseUrl(config.baseUrl, config.remote)
    } catch (error) {
      throw new ServegateError('CONFIG_INVALID', `invalid engine config: ${source}.${(error as Error).message}`, { cause: error })
    }
    try {
      checkGpuMetricsUrl(config.gpuMetricsUrl, config.remote, `${source}.gpuMetricsUrl`)
    } catch (error) {
      throw new ServegateError('CONFIG_INVALID', `invalid engine config: ${(error as Error).message}`, { cause: error })
    }
  }
  if (config.kind === 'kubernetes') checkKubernetes(config, source)
  if (config.kind === 'llama-server' && config.model.path === undefined && config.model.revision !== null) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `invalid engine config: ${source}.model.revision: llama-server loads a Hugging Face id with -hf <user>/<model>[:quant], ` +
        'which takes no revision; download the GGUF and set model.path, or drop model.revision',
    )
  }
  if (config.kind === 'command' && config.model.path === undefined && config.argv.some((a) => a.includes('{modelPath}'))) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `invalid engine config: ${source}.argv: uses {modelPath} but ${source}.model.path is not set; ` +
        'set model.path to the local weights or use {modelId}',
    )
  }
  return config
}

/** What a `kubernetes` config must hold besides its fields' shapes: one deployment to launch, and a URL to measure. */
function checkKubernetes(config: Extract<ResolvedEngineConfig, { kind: 'kubernetes' }>, source: string): void {
  const invalid = (message: string, cause?: unknown): ServegateError =>
    new ServegateError('CONFIG_INVALID', `invalid engine config: ${message}`, cause === undefined ? undefined : { cause })
  if ((config.manifest === undefined) === (config.helm === undefined)) {
    throw invalid(
      `${source}.manifest, ${source}.helm: ${config.manifest === undefined ? 'neither is' : 'both are'} set; set exactly one: ` +
        'manifest (a YAML file applied with kubectl apply -f) or helm ({ chart, release }, installed with helm install)',
    )
  }
  // The deployment is on another host by nature: the kind itself names the remote endpoint on purpose.
  try {
    parseBaseUrl(config.baseUrl, true)
  } catch (error) {
    throw invalid(`${source}.${(error as Error).message}`, error)
  }
  try {
    checkGpuMetricsUrl(config.gpuMetricsUrl, true, `${source}.gpuMetricsUrl`)
  } catch (error) {
    throw invalid((error as Error).message, error)
  }
}

/**
 * Registers the secret values of a launched engine's environment (`secretEnv`, and the names that
 * are secret by their name) so every writer scrubs them, before the engine runs.
 * @throws ServegateError CONFIG_INVALID when a listed value is too short to scrub
 */
export function registerEngineSecrets(config: LaunchedConfig, env: Readonly<Record<string, string>>): void {
  const tooShort = registerEnvSecrets(env, config.secretEnv)
  if (tooShort.length > 0) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `invalid engine config: engine.secretEnv: ${tooShort.join(', ')} ${tooShort.length > 1 ? 'have values' : 'has a value'} shorter than ` +
        `${MIN_SECRET_CHARS} characters, too short to scrub from servegate's output; use a longer secret or drop it from secretEnv`,
    )
  }
}

/**
 * The CPU cores an engine takes on the machine it shares with the client, which the client's
 * worker threads leave to it: llama-server's threads (all cores when llama.cpp picks), a GPU
 * engine's API server and scheduler (2) plus one busy process per tensor-parallel GPU worker,
 * one for a command or an external endpoint, none for the in-process engine (it runs in the
 * cell's own thread) or a Kubernetes deployment (it runs on the cluster).
 * @example engineCpuCores(resolveEngineConfig({ kind: 'vllm', model: { id: 'm' }, tensorParallel: 8 })) // 10
 */
export function engineCpuCores(config: ResolvedEngineConfig, cores = availableParallelism()): number {
  switch (config.kind) {
    case 'llama-server':
      return config.threads ?? cores
    case 'vllm':
    case 'sglang':
    case 'trtllm':
      return 2 + config.tensorParallel
    case 'node-llama-cpp':
    case 'kubernetes':
      return 0
    default:
      return 1
  }
}
