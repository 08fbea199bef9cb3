/**
 * Writes a tiny random-weight llama model as GGUF v3, so that real engines (node-llama-cpp in
 * process, llama-server over HTTP) can run on a CPU machine where no model can be downloaded.
 *
 *     node scripts/make-tiny-gguf.ts OUT.gguf [--seed S]
 *
 * The vocabulary is SentencePiece-style (`tokenizer.ggml.model = "llama"`): `<unk>`, `<s>`,
 * `</s>`, 256 byte-fallback tokens `<0x00>`…`<0xFF>`, single characters, and common English
 * words with every `▁`-prefixed prefix of each word (SPM merges pairs only into pieces that
 * exist, so `▁the` is reached through `▁t`, `▁th`). Ordinary English prompts therefore
 * tokenize into many tokens, and characters outside the vocabulary fall back to bytes.
 *
 * The weights are random except for one embedding dimension ({@link BIAS_DIM}) that carries a
 * constant through the residual stream (no layer writes to it) and that `output.weight` reads
 * with a large positive weight for whole-word tokens and a large negative weight for every other
 * token. Generation thus only ever samples whole words (` the`, ` time`, …): never EOS, never a
 * byte or a word fragment, so it runs to `max_tokens` with one non-empty piece per token.
 * Deterministic: the same seed writes the same bytes.
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { encodeGguf, GGUF_DEFAULT_ALIGNMENT, type GgufTensor, type GgufValue } from './gguf.ts'
import { createRandom } from '../src/random.ts'

/** Model shape of the tiny model; written into the GGUF metadata. */
export const TINY_DIMS = {
  nEmbd: 64,
  nHead: 4,
  nHeadKv: 2,
  nLayer: 2,
  nFf: 128,
  rmsEps: 1e-5,
  ropeFreqBase: 10_000,
} as const

/** Default trained context length (tokens); llama-server uses it when `-c` is not given. */
export const DEFAULT_CONTEXT_LENGTH = 32_768
/** Default PRNG seed. */
export const DEFAULT_SEED = 17

/** The embedding dimension that carries the constant which steers the output logits. */
const BIAS_DIM = 0
/** Size of the `output.weight` entry on {@link BIAS_DIM}: + for whole words, − for the rest. */
const LOGIT_STEER = 8

/** Token ids and types fixed by llama.cpp's SPM defaults (`llama-vocab.cpp`). */
const UNK_ID = 0
const BOS_ID = 1
const EOS_ID = 2
/** `TokenType` in gguf-py/gguf/constants.py. */
const TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, BYTE: 6 } as const
/** SentencePiece's whitespace mark, U+2581. */
const SPACE = '\u2581'

/** ChatML, which llama-server also falls back to; stated so both engines agree. */
const CHAT_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

/** Common English words; each becomes a generable `▁word` token. */
const WORDS = `the of and to a in is it you that he was for on are with as I his they be at one have this
from or had by hot word but what some we can out other were all there when up use your how said an each
she which do their time if will way about many then them write would like so these her long make thing see
him two has look more day could go come did number sound no most people my over know water than call first
who may down side been now find any new work part take get place made live where after back little only
round man year came show every good me give our under name very through just form sentence great think say
help low line differ turn cause much mean before move right boy old too same tell does set three want air
well also play small end put home read hand port large spell add even land here must big high such follow
act why ask men change went light kind off need house picture try us again animal point mother world near
build self earth father head stand own page should country found answer school grow study still learn plant
cover food sun four between state keep eye never last let thought city tree cross farm hard start might
story saw far sea draw left late run while press close night real life few north open seem together next
white children begin got walk example ease paper group always music those both mark often letter until mile
river car feet care second book carry took science eat room friend began idea fish mountain stop once base
hear horse cut sure watch color face wood main enough plain girl usual young ready above ever red list though
feel talk bird soon body dog family direct pose leave song measure door product black short numeral class
wind question happen complete ship area half rock order fire south problem piece told knew pass since top
whole king space heard best hour better true during hundred five remember step early hold west ground
interest reach fast verb sing listen six table travel less morning ten simple several vowel toward war lay
against pattern slow center love person money serve appear road map rain rule govern pull cold notice voice
unit power town fine certain fly fall lead cry dark machine note wait plan figure star box noun field rest
correct able pound done beauty drive stood contain front teach week final gave green oh quick develop ocean
warm free minute strong special mind behind clear tail produce fact street inch multiply nothing course
stay wheel full force blue object decide surface deep moon island foot system busy test record boat common
gold possible plane stead dry wonder laugh thousand ago ran check game shape equate miss brought heat snow
tire bring yes distant fill east paint language among The A In It This We They He She You What When`
  .split(/\s+/)
  .filter((word) => word.length > 0)

const CHARACTERS = [...'abcdefghijklmnopqrstuvwxyz', ...'ABCDEFGHIJKLMNOPQRSTUVWXYZ', ...'0123456789', ...'.,!?;:\'"()-']

/** A vocabulary entry as GGUF stores it in three parallel arrays. */
type VocabEntry = { piece: string; score: number; type: number; generable: boolean }

/** Builds the vocabulary: specials, bytes, single characters, `▁`, then word prefixes and words. */
export function tinyVocab(): VocabEntry[] {
  const entries: VocabEntry[] = [
    { piece: '<unk>', score: 0, type: TOKEN_TYPE.UNKNOWN, generable: false },
    { piece: '<s>', score: 0, type: TOKEN_TYPE.CONTROL, generable: false },
    { piece: '</s>', score: 0, type: TOKEN_TYPE.CONTROL, generable: false },
  ]
  for (let byte = 0; byte < 256; byte++) {
    const hex = byte.toString(16).toUpperCase().padStart(2, '0')
    entries.push({ piece: `<0x${hex}>`, score: 0, type: TOKEN_TYPE.BYTE, generable: false })
  }
  const words = new Set(WORDS.map((word) => SPACE + word))
  const pieces: string[] = [SPACE, ...CHARACTERS]
  for (const word of words) {
    for (let end = 2; end <= word.length; end++) pieces.push(word.slice(0, end))
  }
  const seen = new Set<string>()
  for (const piece of pieces) {
    if (seen.has(piece)) continue
    seen.add(piece)
    // SPM merges the highest-scoring pair first; ranking by order of appearance is enough here
    // because each piece is reachable by one chain of prefixes.
    entries.push({ piece, score: -seen.size, type: TOKEN_TYPE.NORMAL, generable: words.has(piece) })
  }
  return entries
}

/** Options of {@link writeTinyGguf}. */
export type TinyGgufOptions = {
  /** PRNG seed of the random weights. @default 17 */
  seed?: number
  /** `llama.context_length` in tokens. @default 32768 */
  contextLength?: number
}

/** What {@link writeTinyGguf} wrote. */
export type TinyGguf = { path: string; sha256: string; bytes: number; vocabSize: number; contextLength: number }

/** Encodes the tiny model; pure (same options, same bytes). */
export function encodeTinyGguf(options: TinyGgufOptions = {}): { bytes: Uint8Array; vocabSize: number; contextLength: number } {
  const seed = options.seed ?? DEFAULT_SEED
  const contextLength = options.contextLength ?? DEFAULT_CONTEXT_LENGTH
  const { nEmbd, nHead, nHeadKv, nLayer, nFf, rmsEps, ropeFreqBase } = TINY_DIMS
  const headDim = nEmbd / nHead
  const vocab = tinyVocab()
  const nVocab = vocab.length
  const random = createRandom(seed)
  const uniform = (scale: number) => (random() * 2 - 1) * scale

  /** A `[cols, rows]` (ggml order) matrix; `fill(row, col)` gives each value, row-major. */
  const matrix = (name: string, cols: number, rows: number, fill: (row: number, col: number) => number): GgufTensor => {
    const data = new Float32Array(cols * rows)
    for (let row = 0; row < rows; row++) {
      for (let col = 0; col < cols; col++) data[row * cols + col] = fill(row, col)
    }
    return { name, shape: [cols, rows], data }
  }
  /** A norm weight that ignores the bias dimension, so the layers see only the random part. */
  const norm = (name: string, keepBias: boolean): GgufTensor => ({
    name,
    shape: [nEmbd],
    data: Float32Array.from({ length: nEmbd }, (_, i) => (i === BIAS_DIM && !keepBias ? 0 : 1)),
  })
  const randomFill = (scale: number) => () => uniform(scale)
  /** Projections back into the residual stream never write the bias dimension. */
  const intoResidual = (scale: number) => (row: number) => (row === BIAS_DIM ? 0 : uniform(scale))

  const tensors: GgufTensor[] = [
    matrix('token_embd.weight', nEmbd, nVocab, (_, col) => (col === BIAS_DIM ? 1 : uniform(0.1))),
    norm('output_norm.weight', true),
    matrix('output.weight', nEmbd, nVocab, (row, col) =>
      col === BIAS_DIM ? (vocab[row]?.generable ? LOGIT_STEER : -LOGIT_STEER) : uniform(1),
    ),
  ]
  for (let layer = 0; layer < nLayer; layer++) {
    const blk = `blk.${layer}`
    tensors.push(
      norm(`${blk}.attn_norm.weight`, false),
      matrix(`${blk}.attn_q.weight`, nEmbd, headDim * nHead, randomFill(0.25)),
      matrix(`${blk}.attn_k.weight`, nEmbd, headDim * nHeadKv, randomFill(0.25)),
      matrix(`${blk}.attn_v.weight`, nEmbd, headDim * nHeadKv, randomFill(0.25)),
      matrix(`${blk}.attn_output.weight`, headDim * nHead, nEmbd, intoResidual(0.1)),
      norm(`${blk}.ffn_norm.weight`, false),
      matrix(`${blk}.ffn_gate.weight`, nEmbd, nFf, randomFill(0.25)),
      matrix(`${blk}.ffn_up.weight`, nEmbd, nFf, randomFill(0.25)),
      matrix(`${blk}.ffn_down.weight`, nFf, nEmbd, intoResidual(0.1)),
    )
  }

  const u32 = (value: number): GgufValue => ({ type: 'u32', value })
  const f32 = (value: number): GgufValue => ({ type: 'f32', value })
  const metadata: Record<string, GgufValue> = {
    'general.architecture': { type: 'string', value: 'llama' },
    'general.name': { type: 'string', value: `servegate tiny llama (random weights, seed ${seed})` },
    'general.alignment': u32(GGUF_DEFAULT_ALIGNMENT),
    'general.file_type': u32(0),
    'llama.vocab_size': u32(nVocab),
    'llama.context_length': u32(contextLength),
    'llama.embedding_length': u32(nEmbd),
    'llama.block_count': u32(nLayer),
    'llama.feed_forward_length': u32(nFf),
    'llama.attention.head_count': u32(nHead),
    'llama.attention.head_count_kv': u32(nHeadKv),
    'llama.attention.layer_norm_rms_epsilon': f32(rmsEps),
    'llama.rope.dimension_count': u32(headDim),
    'llama.rope.freq_base': f32(ropeFreqBase),
    'tokenizer.ggml.model': { type: 'string', value: 'llama' },
    'tokenizer.ggml.tokens': { type: 'string[]', value: vocab.map((entry) => entry.piece) },
    'tokenizer.ggml.scores': { type: 'f32[]', value: vocab.map((entry) => entry.score) },
    'tokenizer.ggml.token_type': { type: 'i32[]', value: vocab.map((entry) => entry.type) },
    'tokenizer.ggml.unknown_token_id': u32(UNK_ID),
    'tokenizer.ggml.bos_token_id': u32(BOS_ID),
    'tokenizer.ggml.eos_token_id': u32(EOS_ID),
    'tokenizer.ggml.add_bos_token': { type: 'bool', value: true },
    'tokenizer.ggml.add_eos_token': { type: 'bool', value: false },
    'tokenizer.ggml.add_space_prefix': { type: 'bool', value: true },
    'tokenizer.chat_template': { type: 'string', value: CHAT_TEMPLATE },
  }
  return { bytes: encodeGguf(metadata, tensors), vocabSize: nVocab, contextLength }
}

/**
 * Writes the tiny model to `path` (creating its directory) and returns its identity.
 * @example await writeTinyGguf('.servegate/tiny-llama.gguf', { seed: 17 })
 */
export async function writeTinyGguf(path: string, options: TinyGgufOptions = {}): Promise<TinyGguf> {
  const { bytes, vocabSize, contextLength } = encodeTinyGguf(options)
  const target = resolve(path)
  await mkdir(dirname(target), { recursive: true })
  const sha256 = createHash('sha256').update(bytes).digest('hex')
  // Written beside the target and renamed over it, and only when it differs: an engine that has
  // the model mapped keeps reading its own inode instead of a file rewritten under it (SIGBUS).
  const existing = await readFile(target).catch(() => null)
  if (existing === null || createHash('sha256').update(existing).digest('hex') !== sha256) {
    const tmp = `${target}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
    await writeFile(tmp, bytes)
    await rename(tmp, target)
  }
  return { path: target, sha256, bytes: bytes.length, vocabSize, contextLength }
}

if (import.meta.main) {
  const { positionals, values } = parseArgs({ allowPositionals: true, options: { seed: { type: 'string' } } })
  const [out] = positionals
  const seed = values.seed === undefined ? DEFAULT_SEED : Number(values.seed)
  if (out === undefined || positionals.length !== 1 || !Number.isInteger(seed)) {
    console.error('usage: node scripts/make-tiny-gguf.ts OUT.gguf [--seed S]  (S an integer)')
    process.exitCode = 2
  } else {
    const written = await writeTinyGguf(out, { seed })
    console.log(
      `${written.path}: ${written.bytes} bytes, ${written.vocabSize} tokens, context ${written.contextLength}, sha256 ${written.sha256}`,
    )
  }
}
