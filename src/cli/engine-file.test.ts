/**
 * `--engine FILE` takes every engine kind a spec can declare, `sim` included, and its help lists
 * them all; a kind or a field that is not one names the one it most likely meant.
 */
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { ENGINE_FILE_KINDS } from './cell-flags.ts'

describe('--engine FILE', () => {
  test('run --help lists every kind an engine file may name, sim included', async ({ cli }) => {
    const help = (await cli(['run', '--help'])).stdout
    const engineHelp = help.slice(help.indexOf('--engine FILE'), help.indexOf('--model NAME'))
    for (const kind of ENGINE_FILE_KINDS) expect(engineHelp, kind).toContain(`"${kind}"`)
    expect(ENGINE_FILE_KINDS).toContain('sim')
  })

  test('{"kind": "sim"} runs a cell on the simulated engine, launched and torn down as engine.sim() is', async ({ cli, testDir }) => {
    const config = join(testDir, 'engine.json')
    await writeFile(
      config,
      JSON.stringify({ kind: 'sim', model: { id: 'sim-model' }, sim: { decodeTokPerS: 2000, prefillTokPerS: 50_000 } }),
    )
    const out = join(testDir, 'run.json')
    const r = await cli(['run', '--engine', config, '--requests', '4', '--max-tokens', '8', '--prompt-tokens', '64', '--out', out])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const record = JSON.parse(await readFile(out, 'utf8')) as { completed: number; manifest: { model: { id: string } } }
    expect(record.completed).toBe(4)
    expect(record.manifest.model.id).toBe('sim-model')
  })

  test.for<[string, object, string]>([
    [
      'a kind that is not one',
      { kind: 'vlm', model: { id: 'm' } },
      'engine.kind: "vlm" is not an engine kind; did you mean "vllm"? use one of vllm, sglang, llama-server, trtllm, command, external, node-llama-cpp, kubernetes, sim',
    ],
    ['no kind', { model: { id: 'm' } }, 'engine.kind: null is not an engine kind; use one of vllm, sglang'],
    [
      'a sim field that is not one',
      { kind: 'sim', sims: { decodeTokPerS: 10 } },
      'engine.sims: not a field of a sim engine; did you mean "sim"?',
    ],
    ['a sim option the cell sets', { kind: 'sim', sim: { port: 8000 } }, 'engine.sim: sim.port is set by the cell; remove it'],
  ])('%s: exit 2 naming the field and the fix', async ([, json, message], { cli, testDir }) => {
    const config = join(testDir, 'engine.json')
    await writeFile(config, JSON.stringify(json))
    const r = await cli(['run', '--engine', config, '--out', join(testDir, 'run.json')])
    expect(r.stderr).toContain(`servegate: --engine ${config}: ${message}`)
    expect(r.code).toBe(2)
  })
})
