import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { ServegateError } from '../errors.ts'
import { readFailure } from './dataset.ts'

/** One turn of a conversation from a file: what the user said, and the reply the file holds (null for a last turn without one). */
interface FileTurn {
  user: string
  assistant: string | null
}

/** One conversation from a file: its own system prompt, if any, and its turns in order. */
export interface FileConversation {
  /** 1-based line of a JSONL file, or 1-based position in a JSON array. */
  line: number
  system: string | null
  turns: FileTurn[]
}

/** A conversations file as read: where, its bytes' sha256 (kept in the record), and its conversations. */
export interface LoadedConversations {
  path: string
  sha256: string
  conversations: FileConversation[]
}

/** ShareGPT's speakers (`from`), as the roles an OpenAI chat request takes. */
const SHAREGPT_ROLES: Record<string, 'system' | 'user' | 'assistant'> = {
  system: 'system',
  human: 'user',
  user: 'user',
  gpt: 'assistant',
  chatgpt: 'assistant',
  assistant: 'assistant',
  bard: 'assistant',
  bing: 'assistant',
}

function fail(path: string, line: number, message: string): never {
  throw new ServegateError('FILE_INVALID', `${path}:${line}: ${message}`)
}

/** The text of an OpenAI message's content: a string, or its text parts joined; anything else fails naming the field. */
function contentText(content: unknown, path: string, line: number, field: string): string {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) {
    const texts = content.map((part: unknown, i) => {
      const p = part as { type?: unknown; text?: unknown }
      if (p?.type === 'text' && typeof p.text === 'string') return p.text
      return fail(path, line, `\`${field}[${i}]\` is not a text part; a conversation file holds text only`)
    })
    return texts.join('')
  }
  return fail(path, line, `\`${field}\` is ${content === null ? 'null' : typeof content}; give the message's text as a string`)
}

/** The messages of one entry, as role and text, from either shape; a wrong field fails naming it. */
function messagesOf(entry: unknown, path: string, line: number): Array<{ role: 'system' | 'user' | 'assistant'; text: string }> {
  const e = entry as { messages?: unknown; conversations?: unknown } | null
  if (e !== null && typeof e === 'object' && Array.isArray(e.messages)) {
    return e.messages.map((m: unknown, i) => {
      const msg = m as { role?: unknown; content?: unknown }
      if (msg?.role !== 'system' && msg?.role !== 'user' && msg?.role !== 'assistant') {
        fail(path, line, `\`messages[${i}].role\` is ${JSON.stringify(msg?.role)}; use system, user or assistant`)
      }
      return { role: msg.role, text: contentText(msg.content, path, line, `messages[${i}].content`) }
    })
  }
  if (e !== null && typeof e === 'object' && Array.isArray(e.conversations)) {
    return e.conversations.map((m: unknown, i) => {
      const msg = m as { from?: unknown; value?: unknown }
      const role = typeof msg?.from === 'string' ? SHAREGPT_ROLES[msg.from.toLowerCase()] : undefined
      if (role === undefined) {
        fail(path, line, `\`conversations[${i}].from\` is ${JSON.stringify(msg?.from)}; use human, gpt or system (ShareGPT)`)
      }
      if (typeof msg.value !== 'string') fail(path, line, `\`conversations[${i}].value\` is not a string; give the turn's text`)
      return { role, text: msg.value }
    })
  }
  return fail(path, line, 'expected an object with `messages` (OpenAI chat) or `conversations` (ShareGPT)')
}

/**
 * One conversation from its messages: an optional leading system message, then user turns, each
 * followed by the assistant's reply; only the last turn may lack one. Anything else fails naming
 * the message.
 */
function conversationOf(entry: unknown, path: string, line: number): FileConversation {
  const messages = messagesOf(entry, path, line)
  let system: string | null = null
  const turns: FileTurn[] = []
  messages.forEach((m, i) => {
    if (m.role === 'system') {
      if (i !== 0) fail(path, line, `message ${i} is a system message; only the first may be`)
      system = m.text
    } else if (m.role === 'user') {
      const last = turns.at(-1)
      if (last !== undefined && last.assistant === null)
        fail(path, line, `message ${i} is a user turn after a user turn; a reply must come between`)
      turns.push({ user: m.text, assistant: null })
    } else {
      const last = turns.at(-1)
      if (last === undefined || last.assistant !== null) fail(path, line, `message ${i} is a reply with no user turn before it`)
      last.assistant = m.text
    }
  })
  if (turns.length === 0) fail(path, line, 'the conversation has no user turn')
  return { line, system, turns }
}

function unreadable(path: string, error: unknown): ServegateError {
  return new ServegateError('FILE_INVALID', `${path}: cannot read the conversations (${readFailure(path, error)}); check the path`, {
    cause: error,
  })
}

/** A conversations file's bytes, parsed: every conversation checked, a bad line named with its field. Pure. */
function parseConversations(bytes: Buffer, path: string): LoadedConversations {
  const text = bytes.toString('utf8')
  const conversations: FileConversation[] = []
  if (text.trimStart().startsWith('[')) {
    let entries: unknown[]
    try {
      entries = JSON.parse(text) as unknown[]
    } catch (error) {
      throw new ServegateError('FILE_INVALID', `${path}: not valid JSON (${(error as Error).message})`, { cause: error })
    }
    entries.forEach((entry, i) => conversations.push(conversationOf(entry, path, i + 1)))
  } else {
    text.split('\n').forEach((raw, i) => {
      if (raw.trim() === '') return
      let entry: unknown
      try {
        entry = JSON.parse(raw)
      } catch {
        fail(path, i + 1, 'not valid JSON; one conversation per line')
      }
      conversations.push(conversationOf(entry, path, i + 1))
    })
  }
  if (conversations.length === 0) throw new ServegateError('FILE_INVALID', `${path}: no conversation in the file`)
  return { path, sha256: createHash('sha256').update(bytes).digest('hex'), conversations }
}

/**
 * Reads a conversations file: JSONL, one conversation a line, in OpenAI's `{ "messages": [{ "role",
 * "content" }] }` shape or ShareGPT's `{ "conversations": [{ "from", "value" }] }`, or a JSON array
 * of either (ShareGPT's published files are one array). Blank lines are skipped. A bad line names
 * its line and field.
 * @throws ServegateError FILE_INVALID
 */
export async function loadConversations(path: string): Promise<LoadedConversations> {
  let bytes: Buffer
  try {
    bytes = await readFile(path)
  } catch (error) {
    throw unreadable(path, error)
  }
  return parseConversations(bytes, path)
}

/**
 * {@link loadConversations} without waiting: what a declaration reads, the same checks and result.
 * @throws ServegateError FILE_INVALID
 */
export function loadConversationsSync(path: string): LoadedConversations {
  let bytes: Buffer
  try {
    bytes = readFileSync(path)
  } catch (error) {
    throw unreadable(path, error)
  }
  return parseConversations(bytes, path)
}

/**
 * Checks that a file whose longest conversation has `longest` user turns can serve `turns`.
 * @throws ServegateError FILE_INVALID naming the longest and the fix
 */
export function checkTurns(path: string, longest: number, turns: number): void {
  if (longest < turns) {
    throw new ServegateError(
      'FILE_INVALID',
      `${path}: no conversation has ${turns} user turns (the longest has ${longest}); set workload.turns to ${longest} or less`,
    )
  }
}

/** The user turns of a file's longest conversation. */
export function longestTurns(file: LoadedConversations): number {
  return Math.max(...file.conversations.map((c) => c.turns.length))
}

/**
 * The conversations of a file that have at least `turns` user turns, the ones a cell of that many
 * turns sends.
 * @throws ServegateError FILE_INVALID when none has, naming the longest and the fix
 */
export function conversationsWithTurns(file: LoadedConversations, turns: number): FileConversation[] {
  checkTurns(file.path, longestTurns(file), turns)
  return file.conversations.filter((c) => c.turns.length >= turns)
}
