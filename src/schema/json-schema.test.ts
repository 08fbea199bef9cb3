import { readFile } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { evidenceIndexJsonSchema, historyRunJsonSchema, noiseProfileJsonSchema, runRecordJsonSchema } from './json-schema.ts'

test('the published schema/run.schema.json is the one derived from the zod schema (run npm run schema)', async () => {
  const published = await readFile(new URL('../../schema/run.schema.json', import.meta.url), 'utf8')
  expect(published).toBe(runRecordJsonSchema())
  const parsed = JSON.parse(published) as { title: string; properties: Record<string, unknown>; required: string[] }
  expect(parsed.title).toBe('servegate.run/v1')
  expect(parsed.required).toEqual(
    expect.arrayContaining(['plan', 'requests', 'completed', 'failed', 'metrics', 'methodology', 'servegateVersion']),
  )
})

test('the published schema/evidence.schema.json is the one derived from the zod schema (run npm run schema)', async () => {
  const published = await readFile(new URL('../../schema/evidence.schema.json', import.meta.url), 'utf8')
  expect(published).toBe(evidenceIndexJsonSchema())
  const parsed = JSON.parse(published) as { title: string; required: string[] }
  expect(parsed.title).toBe('servegate.evidence/v1')
  expect(parsed.required).toEqual(
    expect.arrayContaining(['cells', 'gates', 'findings', 'statistics', 'provenance', 'promotion', 'artifacts']),
  )
})

test('the published noise-profile and history schemas are the ones derived from the zod schemas (run npm run schema)', async () => {
  for (const [file, render, title] of [
    ['noise-profile.schema.json', noiseProfileJsonSchema, 'servegate.noise-profile/v1'],
    ['history.schema.json', historyRunJsonSchema, 'servegate.history/v1'],
  ] as const) {
    const published = await readFile(new URL(`../../schema/${file}`, import.meta.url), 'utf8')
    expect(published).toBe(render())
    expect((JSON.parse(published) as { title: string }).title).toBe(title)
  }
})
