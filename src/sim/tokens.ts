import { createRandom } from '../random.ts'

/**
 * The sim's vocabulary: output tokens are these words, each with a leading space. None is longer
 * than a piece of the sim's tokenizer, so counting a reply's text gives back the tokens it
 * generated, as an engine's own tokenizer does (the usage cross-check relies on it).
 */
const SIM_WORDS = [
  'the',
  'kv',
  'gpu',
  'step',
  'and',
  'each',
  'fast',
  'slow',
  'wait',
  'for',
  'its',
  'turn',
  'in',
  'a',
  'of',
  'that',
  'fill',
  'with',
  'keys',
  'load',
  'so',
  'than',
  'more',
  'then',
  'one',
  'next',
  'page',
  'hit',
  'run',
  'warm',
  'cold',
  'tok',
] as const

/** Longest piece of a word the sim's tokenizer keeps as one token. */
const PIECE_CHARS = 4

/**
 * The sim's tokenizer, deliberately not one token per word (so prompt calibration is real):
 * each whitespace-separated word is cut into pieces of at most four characters.
 * @example tokenPieces('summarize it') // ['summ', 'ariz', 'e', 'it']
 */
function tokenPieces(text: string): string[] {
  const pieces: string[] = []
  for (const word of text.split(/\s+/)) {
    for (let i = 0; i < word.length; i += PIECE_CHARS) pieces.push(word.slice(i, i + PIECE_CHARS))
  }
  return pieces
}

/**
 * Number of sim tokens in a text.
 * @example countTokens('  hello   wide world ') // 5 (hell, o, wide, worl, d)
 */
export function countTokens(text: string): number {
  return tokenPieces(text).length
}

/** Chat template cost per message (role markers) and for the generation prompt, in sim tokens. */
const CHAT_TOKENS_PER_MESSAGE = 4
const CHAT_GENERATION_PROMPT_TOKENS = 3

/** Ids of the chat template's own tokens, past the 50k ids of text pieces. */
const TEMPLATE_START = 50_000
const TEMPLATE_END = 50_001
const TEMPLATE_NEWLINE = 50_002
const ROLE_IDS_FROM = 50_003

/** One message of a chat request as the sim reads it: its role and its text. */
export interface ChatMessageText {
  role: string
  text: string
}

/** A stable 32-bit FNV-1a hash of a string. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  return h >>> 0
}

function roleId(role: string): number {
  return ROLE_IDS_FROM + (fnv1a(role) % 1000)
}

/** Prompt tokens of a chat request after the sim's chat template: what `usage.prompt_tokens` says. */
export function countChatTokens(contents: readonly string[]): number {
  let total = CHAT_GENERATION_PROMPT_TOKENS
  for (const content of contents) total += CHAT_TOKENS_PER_MESSAGE + countTokens(content)
  return total
}

/**
 * Token ids for `/tokenize`: a stable 32-bit FNV-1a hash of each piece, bounded to a 50k vocabulary.
 */
export function tokenIds(text: string): number[] {
  return tokenPieces(text).map((piece) => fnv1a(piece) % 50_000)
}

/**
 * Token ids of a chat request after the sim's chat template: each message is `<start> role <nl>`,
 * its text, `<end>`; the generation prompt `<start> assistant <nl>` closes it. As with real
 * templates, a conversation's next request begins with its previous request's prompt (the
 * generation prompt opens the assistant message that follows), so a prefix cache can serve it.
 * Its length is what `countChatTokens` counts.
 */
export function chatTokenIds(messages: readonly ChatMessageText[]): number[] {
  const ids: number[] = []
  for (const { role, text } of messages) {
    ids.push(TEMPLATE_START, roleId(role), TEMPLATE_NEWLINE)
    for (const id of tokenIds(text)) ids.push(id)
    ids.push(TEMPLATE_END)
  }
  ids.push(TEMPLATE_START, roleId('assistant'), TEMPLATE_NEWLINE)
  return ids
}

/**
 * A deterministic source of output tokens: each call returns one word with a leading space.
 * @example const next = createTokenSource(7); next() // ' the' (always the same for seed 7)
 */
export function createTokenSource(seed: number): () => string {
  const random = createRandom(seed)
  return () => ` ${SIM_WORDS[Math.floor(random() * SIM_WORDS.length)] ?? SIM_WORDS[0]}`
}
