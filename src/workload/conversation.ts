import type { ConversationPlan } from '../schema/run.ts'
import { type BodyExtras, chatJson, type ChatMessage } from './body.ts'
import { conversationsWithTurns, type FileConversation, type LoadedConversations } from './conversation-file.ts'
import { proseSource } from './text.ts'
import type { ResolvedWorkloadSpec } from './workload-spec.ts'

/** What a user turn asks of the model, after its notes. */
const USER_TASK = 'Continue the conversation: answer the notes above in a few sentences.'

/** Stream ids: 0 is the shared system prompt; each turn of each session has a user and an assistant stream. */
const SYSTEM_STREAM = 0

/** Where one request of a conversation sits: its session (0-based) and its turn in it (1-based). */
export interface TurnAt {
  session: number
  turn: number
}

/**
 * A conversation workload's requests, each rebuilt from its index: request `session × turns +
 * turn − 1` is turn `turn` of session `session`, sent with the whole history as `messages` — the
 * shared system prompt, then each earlier user turn and the assistant's reply to it (the plan's
 * fixed text when the history is replayed, the model's own when live), then the new user turn.
 * Warm-up requests follow the measured ones as first turns of sessions of their own. Nothing is
 * held per request: a body costs its text, built when it is sent.
 * @example
 * const c = new ConversationLayout(spec, 128, 4, extras, 1.3)
 * c.at(5) // { session: 1, turn: 2 } with 4 turns a session
 */
export class ConversationLayout {
  readonly sessions: number
  readonly turns: number
  readonly #spec: ResolvedWorkloadSpec
  readonly #measured: number
  readonly #maxTokens: number
  readonly #extras: BodyExtras
  readonly #wordsPerToken: number
  readonly #system: string | null
  /** Conversations from a file with at least `turns` user turns; session s sends the (s mod count)-th. Null for generated turns. */
  readonly #file: readonly FileConversation[] | null
  readonly plan: ConversationPlan

  /**
   * @param measured the measured requests (sessions × turns); indices past them are warm-up first turns
   * @param tokensPerWord how many of the engine's tokens a generated word makes (measured with its tokenizer, or estimated)
   * @param file conversations read from `spec.conversations`; null for generated turns
   * @throws ServegateError FILE_INVALID when no conversation of the file has `turns` user turns
   */
  constructor(
    spec: ResolvedWorkloadSpec,
    maxTokens: number,
    measured: number,
    extras: BodyExtras,
    tokensPerWord: number,
    file: LoadedConversations | null = null,
  ) {
    this.#spec = spec
    this.sessions = spec.sessions ?? 1
    this.turns = spec.turns ?? 1
    this.#measured = measured
    this.#maxTokens = maxTokens
    this.#extras = extras
    this.#wordsPerToken = 1 / tokensPerWord
    const history = spec.history ?? 'replayed'
    const systemTokens = spec.systemTokens ?? 0
    this.#file = file === null ? null : conversationsWithTurns(file, this.turns)
    this.plan = {
      sessions: this.sessions,
      turns: this.turns,
      userTokens: file === null ? (spec.userTokens ?? 256) : null,
      systemTokens,
      assistantTokens: history === 'replayed' && file === null ? (spec.assistantTokens ?? maxTokens) : null,
      thinkTimeMs: spec.thinkTimeMs ?? 0,
      history,
    }
    this.#system = systemTokens > 0 ? proseSource(spec.seed, SYSTEM_STREAM).take(this.#words(systemTokens)) : null
  }

  /** The session and turn of request `index`; a warm-up request is turn 1 of a session past the measured ones. */
  at(index: number): TurnAt {
    if (index >= this.#measured) return { session: this.sessions + index - this.#measured, turn: 1 }
    return { session: Math.floor(index / this.turns), turn: (index % this.turns) + 1 }
  }

  /** The index of turn `turn` (1-based) of measured session `session`. */
  indexOf(session: number, turn: number): number {
    return session * this.turns + turn - 1
  }

  /** The new user message of request `index`. */
  user(index: number): string {
    const { session, turn } = this.at(index)
    const fromFile = this.#conversation(session)
    if (fromFile !== null) return (fromFile.turns[turn - 1] as { user: string }).user
    const notes = proseSource(this.#spec.seed, this.#stream(session, turn, 1)).take(this.#words(this.plan.userTokens ?? 0))
    return `Session ${this.#spec.seed}-${session}, turn ${turn}.\n\n${notes}\n\n${USER_TASK}`
  }

  /** The plan's fixed reply to turn `turn` of `session`: a replayed history's assistant message. */
  assistant(session: number, turn: number): string {
    const fromFile = this.#conversation(session)
    if (fromFile !== null) return fromFile.turns[turn - 1]?.assistant ?? ''
    return proseSource(this.#spec.seed, this.#stream(session, turn, 2)).take(this.#words(this.plan.assistantTokens ?? this.#maxTokens))
  }

  /**
   * The messages of request `index`: the system prompt, the history and the new user turn.
   * @param replies live history: the model's replies to this session's earlier turns, in order
   */
  messages(index: number, replies: readonly string[] | null = null): ChatMessage[] {
    const { session, turn } = this.at(index)
    const messages = this.#systemMessages(session)
    const first = this.indexOf(session, 1)
    for (let k = 1; k < turn; k++) {
      messages.push({ role: 'user', content: this.user(first + k - 1) })
      messages.push({ role: 'assistant', content: replies === null ? this.assistant(session, k) : (replies[k - 1] ?? '') })
    }
    messages.push({ role: 'user', content: this.user(index) })
    return messages
  }

  /** The model-free JSON body of request `index` (live history: with the model's `replies` so far). */
  body(index: number, replies: readonly string[] | null = null): string {
    return chatJson(this.messages(index, replies), this.#maxTokens, this.#extras)
  }

  /**
   * What both arms of a live conversation are planned to send at request `index`: the system
   * prompt and the new user turn, as a JSON body without the history (which differs by design).
   */
  plannedTurn(index: number): string {
    const system = this.#systemMessages(this.at(index).session)
    return chatJson([...system, { role: 'user', content: this.user(index) }], this.#maxTokens, this.#extras)
  }

  /** The conversation session `session` sends from the file; null for generated turns. */
  #conversation(session: number): FileConversation | null {
    const file = this.#file
    return file === null ? null : (file[session % file.length] as FileConversation)
  }

  /** The system message a session starts with: its file conversation's own, or the shared generated one. */
  #systemMessages(session: number): ChatMessage[] {
    const system = this.#file === null ? this.#system : (this.#conversation(session)?.system ?? null)
    return system === null ? [] : [{ role: 'system', content: system }]
  }

  #stream(session: number, turn: number, part: 1 | 2): number {
    return 1 + 2 * (session * this.turns + turn - 1) + part - 1
  }

  #words(tokens: number): number {
    return Math.max(1, Math.round(tokens * this.#wordsPerToken))
  }
}
