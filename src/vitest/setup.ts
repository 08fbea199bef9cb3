import { afterAll, expect } from 'vitest'
import { matchers } from '../matchers/index.ts'
import { stopSharedEngines, useFileTeardown } from '../declare/worker-environment.ts'
import { takeFileMeta } from '../worker/cell-registry.ts'

// Registered by the servegate plugin's setup file, which runs before each spec file.
expect.extend(matchers)
useFileTeardown()

// A file-level hook: after every test of the file, its engines stop and its declared cells, with
// their run records, go into the file's meta for the reporter (blob reports keep it for merges).
// vitest requires the first argument to be destructured; the suite comes second.
// eslint-disable-next-line no-empty-pattern
afterAll(async ({}, suite) => {
  try {
    await stopSharedEngines()
  } finally {
    const meta = takeFileMeta()
    if (meta.cells.length > 0) suite.meta.servegateFile = meta
  }
})
