-- Neovim 0.11+: `vim.lsp.enable('inplace_lsp')`. Override any field with
-- `vim.lsp.config('inplace_lsp', { cmd = { '/path/to/inplace-lsp', 'server' } })`.
---@type vim.lsp.Config
return require('inplace_lsp').config()
