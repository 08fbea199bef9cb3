import { type BodyExtras, bodyExtras, type ChatContent, requestJson } from './body.ts'
import { canaryInstruction, canaryMarker } from './canary.ts'
import { datasetUserContent, type LoadedDataset, type ResolvedRow } from './dataset.ts'
import type { PlannedSize, PreparePlan } from './prepare.ts'
import { RequestSizes } from './request-sizes.ts'
import { codeSource, proseSource, type TextSource } from './text.ts'
import type { ResolvedWorkloadSpec } from './workload-spec.ts'

/** How planned tokens become text where no engine tokenizer answers. */
export const ESTIMATED_TOKENS_PER_WORD = 1.3

const TASKS: Record<Exclude<ResolvedWorkloadSpec['kind'], 'dataset' | 'conversation'>, string> = {
  'synthetic-summary': 'Summarize the notes above in three sentences.',
  'synthetic-repeated-code': 'Describe what the code above does in a few sentences.',
  'shared-prefix': 'Summarize the notes above in three sentences.',
}

/** Shared-prefix groups as a layout reads them: each request's group and each group's system prompt. */
export interface LayoutGroups {
  of(index: number): number
  systems: readonly string[]
}

/** Stream ids: request i reads text stream i + 1; stream 0 is the shared block. */
const SHARED_STREAM = 0

/** The generated text of one stream: code for the repeated-code kind, prose otherwise. */
function source(spec: ResolvedWorkloadSpec, stream: number): TextSource {
  return spec.kind === 'synthetic-repeated-code' ? codeSource(spec.seed, stream) : proseSource(spec.seed, stream)
}

/** The shared block (a shared prefix) of `pieces` pieces of text. */
export function sharedText(spec: ResolvedWorkloadSpec, pieces: number): string {
  return source(spec, SHARED_STREAM).take(pieces)
}

/**
 * How a plan's prompts are laid out, each rebuilt from its index: the shared block (shared
 * prefix), a per-request header (so no two prompts share more than the shared block), the body
 * — `pieces` pieces of generated text, or the dataset row's prompt — then the canary
 * instruction and the task. Sizes come from the plan (a trace's per request) or the spec.
 * @example const layout = new PromptLayout(spec, plan, null, null); layout.text(3, layout.estimate(3), null)
 */
export class PromptLayout {
  readonly spec: ResolvedWorkloadSpec
  /** Measured and warm-up requests together. */
  readonly total: number
  readonly #plan: PreparePlan
  readonly #shared: string | null
  readonly #dataset: LoadedDataset | null
  readonly #extras: BodyExtras
  readonly #sizes: RequestSizes
  readonly #groups: LayoutGroups | null

  /**
   * @param shared the shared block's text; null without a shared prefix
   * @param dataset the loaded dataset of the `dataset` kind; null for synthetic kinds
   * @param options each request's sizes (drawn once per plan; by default from the spec and plan), and
   *   shared-prefix groups: each request's group and each group's system prompt, which then opens the prompt
   */
  constructor(
    spec: ResolvedWorkloadSpec,
    plan: PreparePlan,
    shared: string | null,
    dataset: LoadedDataset | null,
    options: { sizes?: RequestSizes; groups?: LayoutGroups | null } = {},
  ) {
    this.spec = spec
    this.total = plan.requests + plan.warmupRequests
    this.#plan = plan
    this.#shared = shared
    this.#dataset = dataset
    this.#sizes = options.sizes ?? new RequestSizes(spec, plan)
    this.#groups = options.groups ?? null
    this.#extras = bodyExtras(plan.api, this.#sizes.maxTokens, spec.sampling, spec.outputControl)
  }

  /** The body fields every request of the plan's own `max_tokens` carries. */
  get extras(): BodyExtras {
    return this.#extras
  }

  /** The dataset row request `index` asks (rows cycle); null for synthetic kinds. */
  row(index: number): ResolvedRow | null {
    const dataset = this.#dataset
    return dataset === null ? null : (dataset.rows[index % dataset.rows.length] as ResolvedRow)
  }

  /** Request `index`'s planned prompt tokens and `max_tokens`. */
  size(index: number): PlannedSize {
    return this.#sizes.size(index)
  }

  /** The shared-prefix group of request `index`; null without groups. */
  group(index: number): number | null {
    return this.#groups === null ? null : this.#groups.of(index)
  }

  /** The prompt text of request `index` with `pieces` pieces of generated text, or its row's prompt. */
  text(index: number, pieces: number, row: ResolvedRow | null): string {
    const spec = this.spec
    const body = row !== null ? row.prompt : source(spec, index + 1).take(pieces)
    const canary = spec.canaries ? canaryInstruction(canaryMarker(spec.seed, index)) : null
    const task = spec.kind === 'dataset' || spec.kind === 'conversation' ? null : TASKS[spec.kind]
    const tail = [canary, task].filter((t) => t !== null).join(' ')
    const shared = this.#groups === null ? this.#shared : (this.#groups.systems[this.#groups.of(index)] as string)
    return [shared, `Request ${spec.seed}-${index}.`, body, tail].filter((p) => p !== null && p !== '').join('\n\n')
  }

  /** The pieces that make request `index`'s prompt its planned size, estimated from words (no tokenizer). */
  estimate(index: number, size: PlannedSize = this.size(index)): number {
    const fixedTokens = Math.round(this.text(index, 0, null).split(/\s+/).length * ESTIMATED_TOKENS_PER_WORD)
    return Math.max(1, Math.round((size.promptTokens - fixedTokens) / ESTIMATED_TOKENS_PER_WORD))
  }

  /** The model-free JSON body of request `index` whose prompt has `pieces` pieces (0 for a row's). */
  body(index: number, pieces: number, row: ResolvedRow | null): string {
    const { api } = this.#plan
    const maxTokens = this.#sizes.maxTokens
    const size = this.size(index)
    const prompt = this.text(index, pieces, row)
    const content: ChatContent = row === null ? prompt : datasetUserContent({ ...row, prompt })
    const extras =
      size.maxTokens === maxTokens ? this.#extras : bodyExtras(api, size.maxTokens, this.spec.sampling, this.spec.outputControl)
    return requestJson(api, content, size.maxTokens, extras)
  }
}
