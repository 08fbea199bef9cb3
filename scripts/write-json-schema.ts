import { writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { runRecordJsonSchema } from '../src/schema/json-schema.ts'

const target = fileURLToPath(new URL('../schema/run.schema.json', import.meta.url))
await writeFile(target, runRecordJsonSchema())
console.log(`wrote ${target}`)
