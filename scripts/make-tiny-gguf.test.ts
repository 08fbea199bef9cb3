import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { getLlama, LlamaCompletion, type Llama, type LlamaModel, type Token } from 'node-llama-cpp'
import { afterAll, describe, expect } from 'vitest'
import { test } from '../fixtures/test-context.ts'
import { decodeGgufHeader } from './gguf.ts'
import { encodeTinyGguf, TINY_DIMS, writeTinyGguf, type TinyGguf } from './make-tiny-gguf.ts'

const PROMPT = 'Write the first story about the water of the old river, then answer the question.'

describe('encodeTinyGguf', () => {
  test('writes the same bytes for the same seed and different bytes for another', () => {
    const sha = (seed: number) => createHash('sha256').update(encodeTinyGguf({ seed }).bytes).digest('hex')
    expect(sha(17)).toBe(sha(17))
    expect(sha(18)).not.toBe(sha(17))
  })

  test('is a GGUF v3 llama with an SPM vocabulary, byte fallback and aligned f32 tensors', () => {
    const { bytes, vocabSize } = encodeTinyGguf()
    expect(bytes.length).toBeLessThan(10 * 1024 * 1024)
    const header = decodeGgufHeader(bytes)
    expect(header.version).toBe(3)
    expect(header.metadata['general.architecture']).toBe('llama')
    expect(header.metadata['tokenizer.ggml.model']).toBe('llama')
    const tokens = header.metadata['tokenizer.ggml.tokens'] as string[]
    const types = header.metadata['tokenizer.ggml.token_type'] as number[]
    expect(tokens).toHaveLength(vocabSize)
    expect(tokens.slice(0, 3)).toEqual(['<unk>', '<s>', '</s>'])
    expect(types.slice(0, 3)).toEqual([2, 3, 3])
    expect(tokens[3 + 0x0a]).toBe('<0x0A>')
    expect(types.filter((type) => type === 6)).toHaveLength(256)
    expect(tokens).toContain('\u2581the')

    const { nEmbd, nLayer, nFf, nHeadKv, nHead } = TINY_DIMS
    const shapes = Object.fromEntries(header.tensors.map((tensor) => [tensor.name, tensor.shape]))
    expect(shapes['token_embd.weight']).toEqual([nEmbd, vocabSize])
    expect(shapes['output.weight']).toEqual([nEmbd, vocabSize])
    expect(shapes[`blk.${nLayer - 1}.attn_k.weight`]).toEqual([nEmbd, (nEmbd / nHead) * nHeadKv])
    expect(shapes[`blk.${nLayer - 1}.ffn_down.weight`]).toEqual([nFf, nEmbd])
    expect(header.tensors).toHaveLength(3 + 9 * nLayer)
    expect(header.dataOffset % 32).toBe(0)
    for (const tensor of header.tensors) {
      expect(tensor.type).toBe(0)
      expect(tensor.offset % 32).toBe(0)
    }
  })
})

describe('the tiny model in node-llama-cpp', () => {
  let written: TinyGguf
  let llama: Llama
  let model: LlamaModel

  test.beforeAll(async ({ tmpDir }) => {
    written = await writeTinyGguf(join(tmpDir, 'tiny.gguf'))
    // Prebuilt CPU binaries only; the default thread count nearly hangs a 2-core machine.
    llama = await getLlama({ gpu: false, build: 'never', maxThreads: 1, progressLogs: false })
    model = await llama.loadModel({ modelPath: written.path })
  })

  afterAll(async () => {
    await model?.dispose()
    await llama?.dispose()
  })

  test('the file on disk matches the reported identity', async () => {
    const bytes = await readFile(written.path)
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(written.sha256)
    expect(model.trainContextSize).toBe(written.contextLength)
  })

  test('tokenizes English into many tokens and falls back to bytes for unknown characters', () => {
    const tokens = model.tokenize(PROMPT)
    expect(tokens.length).toBeGreaterThan(PROMPT.split(' ').length)
    expect(model.detokenize(tokens)).toBe(PROMPT)
    const odd = 'a <canary-7f3a> {x}\n'
    expect(model.detokenize(model.tokenize(odd))).toBe(odd)
  })

  test('generates exactly the requested tokens: whole words, never EOS', async () => {
    const context = await model.createContext({ contextSize: 2048, threads: 1 })
    try {
      const sequence = context.getSequence()
      const prompt = [model.tokens.bos!, ...model.tokenize(PROMPT)]
      const generated: Token[] = []
      for await (const token of sequence.evaluate(prompt, { temperature: 1, seed: 3 })) {
        generated.push(token)
        if (generated.length === 32) break
      }
      expect(generated).toHaveLength(32)
      const history = [...prompt]
      for (const token of generated) {
        expect(model.isEogToken(token)).toBe(false)
        // With the preceding tokens given, detokenizing keeps the word's leading space.
        expect(model.detokenize([token], false, history)).toMatch(/^ [A-Za-z]+$/)
        history.push(token)
      }

      await sequence.clearHistory()
      const completion = new LlamaCompletion({ contextSequence: sequence })
      const { response, metadata } = await completion.generateCompletionWithMeta(PROMPT, { maxTokens: 32, temperature: 0.8, seed: 5 })
      expect(metadata.stopReason).toBe('maxTokens')
      expect(response.trim().split(' ')).toHaveLength(32)
    } finally {
      await context.dispose()
    }
  })
})
