import { z } from 'zod'
import { GroupDistribution } from '../schema/prefix-groups.ts'
import type { Length } from '../schema/lengths.ts'
import { lengthOption, MIN_PROMPT_TOKENS } from './lengths.ts'

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

/** The size a workload plans when it does not say. */
const DEFAULT_PROMPT_TOKENS = 256
/** The most groups a shared-prefix workload plans: each group's system prompt is fitted on its own. */
const MAX_GROUPS = 100_000

/** The fields only a shared-prefix workload with groups takes (with `systemTokens`, which a conversation takes too). */
const GROUP_FIELDS = ['groups', 'promptsPerGroup', 'questionTokens', 'groupDistribution'] as const

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
    /**
     * Planned prompt tokens as the engine counts them (`usage.prompt_tokens`): one size, or a
     * distribution each request draws its own from (seeded, the same on both arms).
     * @default 256
     * @example { lognormal: { median: 512, sigma: 0.5 } }
     */
    promptTokens: lengthOption(MIN_PROMPT_TOKENS).default(DEFAULT_PROMPT_TOKENS),
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
    /**
     * Conversation: tokens of a system prompt every session shares (what lets turn 1 of session 2
     * hit the cache). @default 0. Shared-prefix groups: tokens of each group's own system prompt.
     */
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
    /** Shared-prefix groups: how many groups, each with its own system prompt; the cell's requests are `groups × promptsPerGroup`. */
    groups: z.int().min(1).max(MAX_GROUPS).optional(),
    /** Shared-prefix groups: requests per group (on average, with a Zipf distribution). */
    promptsPerGroup: z.int().min(1).max(1_000_000).optional(),
    /** Shared-prefix groups: tokens of each request's own question, after its group's system prompt. */
    questionTokens: z.int().min(MIN_PROMPT_TOKENS).optional(),
    /** Shared-prefix groups: how requests fall into groups, seeded. @default 'uniform' @example { zipf: 1.5 } */
    groupDistribution: GroupDistribution.optional(),
  })
  .superRefine((w, ctx) => {
    const issue = (field: string, message: string): void => ctx.addIssue({ code: 'custom', path: [field], message })
    groupAndLengthIssues(w, issue)
    if (w.kind !== 'conversation') {
      for (const field of CONVERSATION_FIELDS) {
        if (field === 'systemTokens' && w.kind === 'shared-prefix') continue
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

/** What the group and size checks read of a workload. */
interface SizedWorkload {
  kind: WorkloadKind
  promptTokens: Length
  prefixCache: PrefixCache
  systemTokens?: number | undefined
  groups?: number | undefined
  promptsPerGroup?: number | undefined
  questionTokens?: number | undefined
  groupDistribution?: GroupDistribution | undefined
}

/**
 * Shared-prefix groups (all four sizes, nothing that contradicts them) and drawn prompt sizes
 * (only where the prompts are generated and can be fitted to them).
 */
function groupAndLengthIssues(w: SizedWorkload, issue: (field: string, message: string) => void): void {
  const drawn = typeof w.promptTokens !== 'number'
  if (w.kind !== 'shared-prefix') {
    for (const field of GROUP_FIELDS) {
      if (w[field] !== undefined) issue(field, `only a shared-prefix workload takes ${field}; set kind: 'shared-prefix' or remove it`)
    }
    if (drawn && w.kind === 'dataset') issue('promptTokens', 'dataset prompts are sent as written; pass one number or remove promptTokens')
    if (drawn && w.kind === 'conversation') {
      issue('promptTokens', "a conversation's turns are sized by userTokens; pass one number or remove promptTokens")
    }
  } else if ([...GROUP_FIELDS, 'systemTokens' as const].some((f) => w[f] !== undefined)) {
    const example = "e.g. { kind: 'shared-prefix', groups: 8, promptsPerGroup: 16, systemTokens: 2048, questionTokens: 128 }"
    for (const field of ['groups', 'promptsPerGroup', 'systemTokens', 'questionTokens'] as const) {
      if (w[field] === undefined)
        issue(field, `shared-prefix groups need groups, promptsPerGroup, systemTokens and questionTokens; ${example}`)
    }
    if (w.systemTokens === 0) issue('systemTokens', "each group's system prompt needs at least 1 token; pass systemTokens ≥ 1")
    if (w.prefixCache.mode === 'shared') issue('prefixCache', 'the groups share their own system prompts; remove prefixCache')
    const sum = (w.systemTokens ?? 0) + (w.questionTokens ?? 0)
    if (drawn || (w.promptTokens !== DEFAULT_PROMPT_TOKENS && w.promptTokens !== sum)) {
      issue('promptTokens', 'with groups each prompt is systemTokens + questionTokens; remove promptTokens')
    }
  } else if (drawn && w.prefixCache.mode !== 'shared') {
    issue(
      'prefixCache',
      "a shared-prefix workload whose promptTokens is drawn needs its shared block's size; pass prefixCache: { mode: 'shared', tokens: N } or use groups",
    )
  }
  if (drawn && w.prefixCache.mode === 'shared' && typeof w.promptTokens !== 'number' && 'uniform' in w.promptTokens) {
    const min = w.promptTokens.uniform[0]
    if (w.prefixCache.tokens >= min) {
      issue('prefixCache', `${w.prefixCache.tokens} shared tokens leave no room in a ${min}-token prompt; make tokens smaller than ${min}`)
    }
  }
}
