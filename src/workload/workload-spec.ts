import { z } from 'zod'

/** The workload kinds; each is deterministic from its seed and plan. */
export const WORKLOAD_KINDS = ['synthetic-summary', 'synthetic-repeated-code', 'shared-prefix', 'dataset'] as const
export const WorkloadKind = z.enum(WORKLOAD_KINDS)
export type WorkloadKind = z.infer<typeof WorkloadKind>

/**
 * Prefix-cache control: `unique` starts every prompt with a per-request header so no two
 * requests share a cacheable prefix; `shared` starts every prompt with the same block of
 * `tokens` tokens, then the per-request part.
 */
const PrefixCache = z.union([z.object({ mode: z.literal('unique') }), z.object({ mode: z.literal('shared'), tokens: z.int().min(1) })])
type PrefixCache = z.infer<typeof PrefixCache>

/**
 * Output-length control through engine knobs, never through the prompt. `observe` records
 * whether each completion had exactly `max_tokens` tokens; `strict` also marks a non-exact or
 * unverifiable completion contract-invalid. `none` sends no knob (natural output).
 */
export const OutputControl = z.object({
  mode: z.enum(['none', 'observe', 'strict']).default('none'),
  /** `ignore_eos: true` (vLLM, SGLang, llama.cpp, TensorRT-LLM) or `min_tokens = max_tokens` (vLLM). */
  knob: z.enum(['ignore_eos', 'min_tokens']).default('ignore_eos'),
})
export type OutputControl = z.infer<typeof OutputControl>

/** Sampling parameters; sent identically to both arms; unset ones are not sent (engine default). */
export const Sampling = z.object({
  temperature: z.number().min(0).max(2).optional(),
  topP: z.number().gt(0).max(1).optional(),
  seed: z.int().optional(),
  /** Chat only: `reasoning_effort`. */
  reasoningEffort: z.enum(['low', 'medium', 'high']).optional(),
  /** Chat only: `chat_template_kwargs.enable_thinking` (Qwen3-style thinking switch). */
  thinking: z.enum(['enabled', 'disabled']).optional(),
})
export type Sampling = z.infer<typeof Sampling>

/** A workload plan: what every request of a cell contains, before the model name. */
export const WorkloadSpec = z.object({
  kind: WorkloadKind.default('synthetic-summary'),
  /** Planned prompt tokens as the engine counts them (`usage.prompt_tokens`). @default 256 */
  promptTokens: z.int().min(8).default(256),
  /** @default 0 */
  seed: z.int().min(0).default(0),
  prefixCache: PrefixCache.default({ mode: 'unique' }),
  /** JSONL of prompts with reference answers; required for `dataset`. */
  datasetPath: z.string().optional(),
  /** Ask each response to begin with a unique marker and check it. @default false */
  canaries: z.boolean().default(false),
  outputControl: OutputControl.default({ mode: 'none', knob: 'ignore_eos' }),
  sampling: Sampling.default({}),
  /** Floor of measured requests per concurrency slot (requests ≥ k·C); below it a cell is flagged. @default 4 */
  requestsPerSlotFloor: z.int().min(1).default(4),
  /** Characters of content kept per request for canaries and scoring; a longer reply fails closed. @default 65536 */
  captureChars: z.int().min(256).default(65_536),
})
export type WorkloadSpec = z.input<typeof WorkloadSpec>
export type ResolvedWorkloadSpec = z.infer<typeof WorkloadSpec>
