raise ValueError("this module fails to import")
