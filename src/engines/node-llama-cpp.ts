import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import type { Llama, LlamaContextSequence, LlamaModel } from 'node-llama-cpp'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { ChunkStamps, type TextCapture } from '../client/observation.ts'
import { digestSent } from '../client/sent-digest.ts'
import { captureContent, emptyObservation, type StreamObservation } from '../client/stream.ts'
import type { ChatText, EngineTokenizer } from '../client/tokenize.ts'
import { sanitizeMessage, ServegateError } from '../errors.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { ErrorInfo } from '../schema/run.ts'
import type { ResolvedEngineConfig } from './config.ts'
import type { GpuFactsProbe } from './launch.ts'
import { absent, harnessFacts, hostFacts, known, modelFingerprint } from './manifest-facts.ts'
import { monoMs } from '../client/clock.ts'
import { SequencePool } from './sequence-pool.ts'

type Config = Extract<ResolvedEngineConfig, { kind: 'node-llama-cpp' }>

/** The optional peer dependency's pinned version, and the one line that says how to add it. */
const NODE_LLAMA_CPP_VERSION = '3.21.1'
export const NODE_LLAMA_CPP_MISSING =
  'the in-process engine needs the optional peer dependency node-llama-cpp; ' +
  `install it with: npm i -D node-llama-cpp@${NODE_LLAMA_CPP_VERSION}`

/**
 * Whether node-llama-cpp is installed where this package resolves its dependencies (a look at
 * the node_modules folders Node would search, without loading its native bindings).
 */
export function nodeLlamaCppInstalled(): boolean {
  const paths = createRequire(import.meta.url).resolve.paths('node-llama-cpp') ?? []
  return paths.some((dir) => existsSync(join(dir, 'node-llama-cpp', 'package.json')))
}

/**
 * Throws the install line when node-llama-cpp is missing.
 * @throws ServegateError ENGINE_NOT_FOUND naming `npm i -D node-llama-cpp@3.21.1`
 */
export function requireNodeLlamaCpp(): void {
  if (!nodeLlamaCppInstalled()) throw new ServegateError('ENGINE_NOT_FOUND', NODE_LLAMA_CPP_MISSING)
}

/** An engine running inside servegate's process, measured through the same observation as HTTP ones. */
export interface InProcessEngine {
  model: string
  manifest: Manifest
  send(body: Buffer, capture: TextCapture, signal: AbortSignal, deadlineMs: number): Promise<StreamObservation>
  tokenizer: EngineTokenizer
  stop(): Promise<void>
}

interface RequestBody {
  model?: unknown
  messages?: Array<{ content?: unknown }>
  prompt?: unknown
  max_tokens?: number
  max_completion_tokens?: number
  ignore_eos?: boolean
  min_tokens?: number
  temperature?: number
  top_p?: number
  seed?: number
}

/**
 * The text an in-process request feeds the model: the prompt, or the chat messages' text
 * joined by newlines (the tiny models servegate runs in-process have no chat template).
 * Returns null for content it cannot feed (images).
 */
function promptOf(body: RequestBody): string | null {
  if (typeof body.prompt === 'string') return body.prompt
  const parts: string[] = []
  for (const m of body.messages ?? []) {
    if (typeof m.content === 'string') parts.push(m.content)
    else if (Array.isArray(m.content)) {
      for (const part of m.content as Array<{ type?: string; text?: string }>) {
        if (part.type === 'text' && typeof part.text === 'string') parts.push(part.text)
        else return null
      }
    }
  }
  return parts.join('\n')
}

const failure = (code: ErrorInfo['code'], message: string): ErrorInfo => ({
  code,
  message: sanitizeMessage(message),
  httpStatus: null,
  retryAfterS: null,
})

/** What a request needs of the loaded engine: the model, its sequences, and its tokenizer (BOS included). */
interface LoadedModel {
  model: LlamaModel
  sequences: SequencePool<LlamaContextSequence>
  tokenize(text: string): number[]
}

/**
 * Loads a GGUF model with node-llama-cpp (prebuilt CPU binaries, never a build, `threads`
 * threads) with `sequences` parallel sequences, and serves OpenAI-shaped request bodies
 * in-process: every generated token is one chunk, timestamped as it is yielded, and the
 * token counts are the engine's own (usage).
 */
export async function startNodeLlamaCpp(config: Config, gpuFacts: GpuFactsProbe): Promise<InProcessEngine> {
  requireNodeLlamaCpp()
  const { getLlama } = await import('node-llama-cpp')
  const llama = await getLlama({ gpu: false, build: 'never', maxThreads: config.threads, progressLogs: false })
  const model = await llama.loadModel({ modelPath: config.model.path })
  const context = await model.createContext({ contextSize: config.contextSize, sequences: config.sequences, threads: config.threads })
  const sequences = new SequencePool(Array.from({ length: config.sequences }, () => context.getSequence()))
  const tokenize = (text: string): number[] => {
    const bos = model.tokens.bos
    const tokens = model.tokenize(text) as unknown as number[]
    return bos === null ? tokens : [bos as unknown as number, ...tokens]
  }
  const loaded: LoadedModel = { model, sequences, tokenize }
  const countChat = async (messages: readonly ChatText[]): Promise<number> => tokenize(messages.map((m) => m.content).join('\n')).length
  return {
    model: config.model.id,
    manifest: await manifestOf(config, llama, gpuFacts),
    send: (body, capture, signal, deadlineMs) => generate(loaded, body, capture, signal, deadlineMs),
    tokenizer: {
      description: 'node-llama-cpp model.tokenize, in-process (BOS included; chat messages joined as plain text)',
      countText: async (t) => tokenize(t).length,
      countChat,
    },
    async stop() {
      await context.dispose()
      await model.dispose()
      await llama.dispose()
    },
  }
}

/** The in-process engine's manifest: node-llama-cpp's version, its llama.cpp release, the model and this machine. */
async function manifestOf(config: Config, llama: Llama, gpuFacts: GpuFactsProbe): Promise<Manifest> {
  // The package's exports hide package.json; it sits one level above the entry (dist/index.js).
  const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.resolve('node-llama-cpp')), 'utf8')) as { version: string }
  const release = llama.llamaCppRelease
  const [fingerprint, harness, gpus] = await Promise.all([modelFingerprint(config.model), harnessFacts(), gpuFacts(null)])
  return {
    engine: {
      kind: 'node-llama-cpp',
      shape: 'in-process',
      version: known(`node-llama-cpp ${pkg.version}`, 'node-llama-cpp package.json'),
      commit: release.release
        ? known(`${release.repo}@${release.release}`, 'llama.llamaCppRelease')
        : absent('node-llama-cpp reports no llama.cpp release'),
      argv: null,
      envNames: [],
      visibleDevices: null,
      tensorParallel: null,
    },
    model: { id: config.model.id, revision: config.model.revision, fingerprint },
    gpus,
    host: hostFacts(),
    harness,
  }
}

/**
 * One request, in-process: parses the body, waits for a free sequence, and generates, each
 * non-empty token a chunk stamped as it is yielded. Never throws: a failure is the
 * observation's `error`.
 */
async function generate(
  loaded: LoadedModel,
  body: Buffer,
  capture: TextCapture,
  signal: AbortSignal,
  deadlineMs: number,
): Promise<StreamObservation> {
  const { model, sequences, tokenize } = loaded
  const sentAt = monoMs()
  const obs = emptyObservation(sentAt)
  if (capture.streamed) obs.streamedText = ''
  let parsed: RequestBody
  try {
    parsed = JSON.parse(body.toString('utf8')) as RequestBody
  } catch {
    obs.sent = digestSent([body], null)
    obs.error = failure('STREAM_PROTOCOL', 'the request body is not JSON')
    obs.endAt = monoMs()
    return obs
  }
  obs.sent = digestSent([body], typeof parsed.model === 'string' ? parsed.model : null)
  const stamps = new ChunkStamps()
  const text = promptOf(parsed)
  if (text === null) {
    obs.error = failure('CONTRACT_INVALID', 'the in-process engine takes text only; this request has image parts')
    obs.endAt = monoMs()
    return obs
  }
  const maxTokens = parsed.max_completion_tokens ?? parsed.max_tokens ?? 16
  const minTokens = parsed.ignore_eos === true ? maxTokens : (parsed.min_tokens ?? 0)
  const deadline = sentAt + deadlineMs
  const sequence = await sequences.acquire()
  try {
    const prompt = tokenize(text)
    obs.usagePromptTokens = prompt.length
    const history = [...prompt]
    let generated = 0
    const options = { temperature: parsed.temperature ?? 0.8, topP: parsed.top_p, seed: parsed.seed }
    for await (const token of sequence.evaluate(prompt as never, options)) {
      const at = monoMs()
      if (model.isEogToken(token) && generated >= minTokens) {
        obs.finishReason = 'stop'
        break
      }
      const piece = model.detokenize([token], false, history as never)
      history.push(token as unknown as number)
      generated++
      if (piece !== '') {
        stamps.push(at)
        obs.contentChunks++
        obs.firstOutputAt ??= at
        obs.firstContentAt ??= at
        if (capture.contentChars > 0 && !obs.contentTruncated) captureContent(obs, piece, capture.contentChars)
        if (obs.streamedText !== null) obs.streamedText += piece
      }
      if (generated >= maxTokens) {
        obs.finishReason = 'length'
        break
      }
      if (signal.aborted) {
        obs.error = failure('REQUEST_ABORTED', 'cancelled by the caller')
        break
      }
      if (at > deadline) {
        obs.error = failure('REQUEST_DEADLINE', `no end of generation within the ${deadlineMs} ms request deadline`)
        break
      }
    }
    obs.usageCompletionTokens = generated
    obs.endAt = monoMs()
    if (obs.error === null && obs.firstOutputAt === null) obs.error = failure('EMPTY_COMPLETION', 'the engine generated no non-empty token')
  } catch (error) {
    obs.endAt = monoMs()
    obs.error = failure('INTERNAL', `node-llama-cpp failed: ${(error as Error).message}`)
  } finally {
    await sequence.clearHistory()
    sequences.release(sequence)
    obs.outputChunkAt = stamps.finish()
  }
  return obs
}
