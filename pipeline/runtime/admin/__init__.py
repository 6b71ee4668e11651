"""Table administration: pre-split creation from rowkey designs, description."""
