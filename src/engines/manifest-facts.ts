import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { readdir, readFile, stat } from 'node:fs/promises'
import { arch, cpus, release, totalmem, type as osType } from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Manifest } from '../schema/manifest.ts'
import { SERVEGATE_VERSION } from '../version.ts'
import type { ModelRef } from './config.ts'

type Fact = Manifest['model']['fingerprint']

export const known = (value: string, source: string): Fact => ({ value, source, reason: null })
export const absent = (reason: string): Fact => ({ value: null, source: null, reason })

async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

/**
 * The engine-side fingerprint of a model: sha256 of the GGUF file, or of the weights index
 * (`*.safetensors.index.json`, else `config.json`) of a local model directory.
 */
export async function modelFingerprint(model: ModelRef): Promise<Fact> {
  if (model.path === undefined) return absent('the engine loads the weights itself (no local path given); nothing to hash')
  let info
  try {
    info = await stat(model.path)
  } catch {
    return absent(`model path ${model.path} does not exist here`)
  }
  if (info.isFile()) return known(await sha256File(model.path), `sha256 of the model file ${model.path}`)
  const names = await readdir(model.path)
  const index =
    names.find((n) => n.endsWith('.safetensors.index.json')) ??
    names.find((n) => n === 'model.safetensors') ??
    names.find((n) => n === 'config.json')
  if (index === undefined) return absent(`no weights index, model.safetensors or config.json in ${model.path}`)
  return known(await sha256File(join(model.path, index)), `sha256 of ${index} in ${model.path}`)
}

let harnessHash: Promise<string> | null = null

/** The measuring code: TypeScript sources in a clone, compiled JavaScript in the installed package; never tests or types. */
function isHarnessSource(name: string): boolean {
  if (/\.test(-d)?\.ts$|\.d\.ts$/.test(name)) return false
  return name.endsWith('.ts') || name.endsWith('.js')
}

async function sourceFiles(dir: string): Promise<string[]> {
  const out: string[] = []
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) out.push(...(await sourceFiles(path)))
    else if (isHarnessSource(entry.name)) out.push(path)
  }
  return out
}

/** sha256 over servegate's own code (path and bytes, sorted; `src/` in a clone, `dist/` installed): one value per measuring code. */
function servegateHarnessHash(): Promise<string> {
  harnessHash ??= (async () => {
    const root = fileURLToPath(new URL('..', import.meta.url))
    const files = (await sourceFiles(root)).sort()
    const hash = createHash('sha256')
    for (const file of files) {
      hash.update(`${relative(root, file)}\n`)
      hash.update(await readFile(file))
    }
    return hash.digest('hex')
  })()
  return harnessHash
}

/** Facts about this host; no hostname (it identifies the operator). */
export function hostFacts(): Manifest['host'] {
  const cpuList = cpus()
  return {
    os: osType(),
    kernel: release(),
    arch: arch(),
    cpuModel: cpuList[0]?.model ?? null,
    cpus: Math.max(1, cpuList.length),
    memoryBytes: totalmem(),
    node: process.version,
  }
}

export async function harnessFacts(): Promise<Manifest['harness']> {
  return { version: SERVEGATE_VERSION, hash: await servegateHarnessHash() }
}

// A flag about token counts (`--max-num-batched-tokens`, `--enable-prompt-tokens-details`) or the tokenizer holds no secret.
const SECRET_FLAG = /(api[-_]?key|token(?!s|izer)|secret|password|passwd|auth)/i

/**
 * An argv with secret values redacted: the value after a flag whose name looks secret
 * (`--api-key X`, `--hf-token=X`), and anything that looks like a key.
 */
export function redactArgv(argv: readonly string[]): string[] {
  const out: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    const eq = arg.indexOf('=')
    if (arg.startsWith('-') && eq > 0 && SECRET_FLAG.test(arg.slice(0, eq))) {
      out.push(`${arg.slice(0, eq)}=[redacted]`)
    } else if (arg.startsWith('-') && SECRET_FLAG.test(arg) && i + 1 < argv.length) {
      out.push(arg, '[redacted]')
      i++
    } else {
      out.push(/^(sk-|hf_)[A-Za-z0-9_-]{8,}$/.test(arg) ? '[redacted]' : arg)
    }
  }
  return out
}
