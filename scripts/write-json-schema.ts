import { writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { evidenceIndexJsonSchema, historyRunJsonSchema, noiseProfileJsonSchema, runRecordJsonSchema } from '../src/schema/json-schema.ts'

for (const [file, render] of [
  ['run.schema.json', runRecordJsonSchema],
  ['evidence.schema.json', evidenceIndexJsonSchema],
  ['noise-profile.schema.json', noiseProfileJsonSchema],
  ['history.schema.json', historyRunJsonSchema],
] as const) {
  const target = fileURLToPath(new URL(`../schema/${file}`, import.meta.url))
  await writeFile(target, render())
  console.log(`wrote ${target}`)
}
