import { z } from 'zod'

/** The workload kinds; each is deterministic from its seed and plan. */
export const WORKLOAD_KINDS = ['synthetic-summary', 'synthetic-repeated-code', 'shared-prefix', 'dataset', 'conversation'] as const
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

/** The most sessions and turns a conversation cell plans (its requests are their product, at most 10 million). */
const MAX_SESSIONS = 1_000_000
const MAX_TURNS = 1_000

/** The fields only a conversation takes. */
const CONVERSATION_FIELDS = [
  'sessions',
  'turns',
  'userTokens',
  'systemTokens',
  'assistantTokens',
  'thinkTimeMs',
  'history',
  'conversations',
] as const

/** A workload plan: what every request of a cell contains, before the model name. */
export const WorkloadSpec = z
  .object({
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
    /** Conversation: sessions, each sent turn after turn; the cell's requests are `sessions × turns`. */
    sessions: z.int().min(1).max(MAX_SESSIONS).optional(),
    /** Conversation: user turns per session. */
    turns: z.int().min(1).max(MAX_TURNS).optional(),
    /** Conversation: tokens of each user turn. */
    userTokens: z.int().min(8).optional(),
    /** Conversation: tokens of a system prompt every session shares (what lets turn 1 of session 2 hit the cache). @default 0 */
    systemTokens: z.int().min(0).optional(),
    /** Conversation, replayed history: tokens of each assistant turn in the history. @default the cell's maxTokens */
    assistantTokens: z.int().min(1).optional(),
    /** Conversation: the wait after a turn ends before the session sends its next one, ms. @default 0 */
    thinkTimeMs: z.number().min(0).max(3_600_000).optional(),
    /**
     * Conversation: `replayed` sends fixed assistant turns from the plan as the history (both arms
     * send the same bytes); `live` sends what the model answered (the arms differ by design).
     * @default 'replayed'
     */
    history: z.enum(['replayed', 'live']).optional(),
    /**
     * Conversation: a file of conversations to send instead of generated turns: JSONL in OpenAI's
     * `messages` shape or ShareGPT's `conversations` shape (or a JSON array of either). Session s
     * sends the s-th conversation with at least `turns` user turns (cycling); with a replayed
     * history the file's own replies are the history.
     */
    conversations: z.string().min(1).optional(),
  })
  .superRefine((w, ctx) => {
    const issue = (field: string, message: string): void => ctx.addIssue({ code: 'custom', path: [field], message })
    if (w.kind !== 'conversation') {
      for (const field of CONVERSATION_FIELDS) {
        if (w[field] !== undefined) issue(field, `only a conversation takes ${field}; set kind: 'conversation' or remove it`)
      }
      return
    }
    const needed = w.conversations === undefined ? (['sessions', 'turns', 'userTokens'] as const) : (['sessions', 'turns'] as const)
    for (const field of needed) {
      if (w[field] === undefined)
        issue(field, `a conversation needs ${field}; e.g. { kind: 'conversation', sessions: 32, turns: 4, userTokens: 128 }`)
    }
    if (w.conversations !== undefined) {
      for (const field of ['userTokens', 'systemTokens', 'assistantTokens'] as const) {
        if (w[field] !== undefined) issue(field, `conversations from a file bring their own text; remove ${field}`)
      }
    }
    if (w.prefixCache.mode === 'shared') {
      issue('prefixCache', 'a conversation shares its systemTokens and its own history; remove prefixCache or use systemTokens')
    }
    if (w.canaries) issue('canaries', 'canaries are not offered for conversations; remove canaries')
    if (w.datasetPath !== undefined) issue('datasetPath', 'a conversation does not read a dataset; remove datasetPath')
  })
export type WorkloadSpec = z.input<typeof WorkloadSpec>
export type ResolvedWorkloadSpec = z.infer<typeof WorkloadSpec>
