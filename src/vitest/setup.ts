import { expect } from 'vitest'
import { matchers } from '../../matchers/index.ts'

// Registered once per worker by the servegate plugin's setup file.
expect.extend(matchers)
